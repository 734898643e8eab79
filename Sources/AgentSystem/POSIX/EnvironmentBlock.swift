import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A process environment as `execve` takes it: a NULL-terminated array of `KEY=VALUE`
/// strings, sorted by key, all in one buffer. Blocks are immutable, so one serves every
/// start with the same environment (``Cache``): most starts pass the same variables,
/// and building the block (sorting, copying) is work on the start's critical path.
public final class EnvironmentBlock: @unchecked Sendable {
    // Safety: `bytes` and `pointers` are written only by `init`; afterwards every user only
    // reads them (execve copies the strings), and `deinit` frees them once no user holds
    // the block (callers keep it alive across `withPointers`).
    /// The variables the block holds.
    public let environment: [String: String]
    private let bytes: UnsafeMutableBufferPointer<CChar>
    private let pointers: UnsafeMutableBufferPointer<UnsafeMutablePointer<CChar>?>

    public init(_ environment: [String: String]) {
        self.environment = environment
        let entries = environment.sorted { $0.key < $1.key }
        var total = 0
        for entry in entries { total += entry.key.utf8.count + entry.value.utf8.count + 2 }
        bytes = .allocate(capacity: max(total, 1))
        pointers = .allocate(capacity: entries.count + 1)
        var offset = 0
        func append(_ text: String, then terminator: UInt8) {
            var text = text
            text.withUTF8 { utf8 in
                if let source = utf8.baseAddress {
                    UnsafeMutableRawPointer(bytes.baseAddress! + offset).copyMemory(from: source, byteCount: utf8.count)
                }
                offset += utf8.count
            }
            bytes[offset] = CChar(bitPattern: terminator)
            offset += 1
        }
        for (index, entry) in entries.enumerated() {
            pointers[index] = bytes.baseAddress! + offset
            append(entry.key, then: UInt8(ascii: "="))
            append(entry.value, then: 0)
        }
        pointers[entries.count] = nil
    }

    deinit {
        bytes.deallocate()
        pointers.deallocate()
    }

    /// Runs `body` with the NULL-terminated array (valid until `body` returns).
    public func withPointers<R>(_ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
        body(UnsafePointer(pointers.baseAddress!))
    }

    /// Whether the block holds exactly `environment`, compared as bytes: Swift's `==` on
    /// strings treats canonically equivalent text as equal ("é" precomposed or not), and
    /// a child must get the bytes it was asked for (paths are bytes).
    func holds(_ environment: [String: String]) -> Bool {
        guard environment.count == self.environment.count else { return false }
        for (key, value) in environment {
            guard let index = self.environment.index(forKey: key) else { return false }
            let stored = self.environment[index]
            guard stored.key.utf8.elementsEqual(key.utf8), stored.value.utf8.elementsEqual(value.utf8) else { return false }
        }
        return true
    }

    /// Keeps the last block made for the next start (one block: bounded).
    public final class Cache: Sendable {
        private let last = Mutex<EnvironmentBlock?>(nil)

        public init() {}

        /// A block for `environment`: the previous one when the variables are byte for byte
        /// the same (a lookup per variable, no sort or copy), else a new one that replaces it.
        public func block(for environment: [String: String]) -> EnvironmentBlock {
            if let previous = last.withLock({ $0 }), previous.holds(environment) { return previous }
            let block = EnvironmentBlock(environment)
            last.withLock { $0 = block }
            return block
        }
    }

    /// The process's cache (process starts).
    public static let cache = Cache()
}
