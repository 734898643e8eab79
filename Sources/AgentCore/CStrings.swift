#if canImport(Glibc)
import Glibc
#endif

/// Runs `body` with a NULL-terminated C array of the strings.
public func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
    let pointers = strings.map { strdup($0) } + [nil]
    defer { for p in pointers { free(p) } }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}

/// Runs `body` with a NULL-terminated `KEY=VALUE` array of `environment`, sorted by key.
/// The strings share one buffer: two allocations for a whole environment instead of three
/// per variable (a process start's environment is rebuilt for every start).
public func withEnvironmentBlock<R>(
    _ environment: [String: String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R
) -> R {
    let entries = environment.sorted { $0.key < $1.key }
    var total = 0
    for entry in entries { total += entry.key.utf8.count + entry.value.utf8.count + 2 }
    let block = UnsafeMutableBufferPointer<CChar>.allocate(capacity: max(total, 1))
    defer { block.deallocate() }
    var pointers = [UnsafeMutablePointer<CChar>?](repeating: nil, count: entries.count + 1)
    var offset = 0
    func append(_ text: String, then terminator: UInt8) {
        for byte in text.utf8 {
            block[offset] = CChar(bitPattern: byte)
            offset += 1
        }
        block[offset] = CChar(bitPattern: terminator)
        offset += 1
    }
    for (index, entry) in entries.enumerated() {
        pointers[index] = block.baseAddress! + offset
        append(entry.key, then: UInt8(ascii: "="))
        append(entry.value, then: 0)
    }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}
