import AgentCore
import Glibc

/// The servers of the configured `.mcp.json` files, merged: files in list order, the first
/// file to declare a name wins it (later ones are dropped with a log line), and an entry
/// that is not valid costs only itself.
///
/// A file that cannot be read or parsed (an editor's half-saved file) keeps the servers of
/// its last good parse and is reported as its own row until it parses again; a file that
/// goes missing after giving servers (an atomic save's moment without it) keeps them for a
/// grace, and gives none only when still missing after it. A file never loaded gives none.
struct MCPConfigSet: Sendable, Equatable {
    /// One file's identity for change detection (links followed): size, modification and
    /// status-change times, inode and device, so that a same-size rewrite whose mtime was
    /// restored (`cp -p`, `touch -r`) still differs; nil when it does not exist.
    struct Fingerprint: Sendable, Equatable {
        var size: Int
        var modifiedNanoseconds: Int64
        var changedNanoseconds: Int64
        var inode: UInt64
        var device: UInt64
    }

    /// What the engine keeps of one file between loads. Bounded: one per configured file,
    /// each at most ``MCPConfigFile/maxServers`` servers.
    struct FileMemory: Sendable, Equatable {
        /// Its last good parse.
        var lastGood: MCPConfigFile?
        /// Since when it has been missing while its last good parse is kept.
        var missingSince: ContinuousClock.Instant?
    }

    /// A file in trouble, shown as its own row of `GET /api/v0/mcp/servers`.
    struct FileProblem: Sendable, Equatable {
        var path: String
        /// ``MCPServerState/invalid`` or ``MCPServerState/missing``.
        var state: MCPServerState
        var message: String
    }

    var servers: [MCPServerConfig] = []
    /// What was wrong, one line each, for the log.
    var problems: [String] = []
    /// The files in trouble, in list order.
    var fileProblems: [FileProblem] = []
    /// What to remember for the next load, by file (only files with a last good parse).
    var memory: [String: FileMemory] = [:]
    /// When the earliest missing file's grace ends (a load is due then); nil when none.
    var recheck: ContinuousClock.Instant?

    /// The fingerprint of each file (links followed).
    static func fingerprints(_ files: [String]) -> [String: Fingerprint?] {
        var out: [String: Fingerprint?] = [:]
        for file in files { out[file] = fingerprint(file) }
        return out
    }

    static func fingerprint(_ path: String) -> Fingerprint? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Fingerprint(
            size: Int(info.st_size),
            modifiedNanoseconds: Int64(info.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(info.st_mtim.tv_nsec),
            changedNanoseconds: Int64(info.st_ctim.tv_sec) &* 1_000_000_000 &+ Int64(info.st_ctim.tv_nsec),
            inode: UInt64(info.st_ino), device: UInt64(info.st_dev))
    }

    /// Reads and merges `files` with what was kept of them (`memory`) at `now`; a file
    /// missing for `missingGrace` gives no servers. `environment` answers the `$VAR`s of
    /// `env` values.
    static func load(
        _ files: [String], memory old: [String: FileMemory] = [:], now: ContinuousClock.Instant = .now,
        missingGrace: Duration = .zero, environment: (String) -> String?
    ) -> MCPConfigSet {
        var set = MCPConfigSet()
        var owner: [String: String] = [:]
        for file in files {
            var memory = old[file] ?? FileMemory()
            var fresh: MCPConfigFile?
            let kept = memory.lastGood == nil ? "" : " (the last good configuration keeps running)"
            switch readConfig(file) {
            case .missing:
                guard let lastGood = memory.lastGood, !lastGood.servers.isEmpty else {
                    memory = FileMemory()
                    break
                }
                let since = memory.missingSince ?? now
                guard now - since < missingGrace else {
                    set.problems.append("mcp config \(goQuote(file)): still missing after \(missingGrace); its servers are removed")
                    memory = FileMemory()
                    break
                }
                memory.missingSince = since
                set.recheck = min(set.recheck ?? since + missingGrace, since + missingGrace)
                set.fileProblems.append(
                    FileProblem(
                        path: file, state: .missing,
                        message: "the file is missing; its servers are kept for \(missingGrace) in case it is being saved"))
            case .failed(let reason):
                memory.missingSince = nil
                set.problems.append("mcp config \(goQuote(file)): \(reason)\(kept)")
                set.fileProblems.append(FileProblem(path: file, state: .invalid, message: reason + kept))
            case .bytes(let bytes):
                memory.missingSince = nil
                do {
                    let parsed = try MCPConfigFile.parse(bytes, environment: environment)
                    memory.lastGood = parsed
                    fresh = parsed
                } catch {
                    let located = syntaxLocation(bytes).map { "line \($0.line), column \($0.column): " } ?? ""
                    set.problems.append("mcp config \(goQuote(file)): \(located)\(error.reason)\(kept)")
                    set.fileProblems.append(FileProblem(path: file, state: .invalid, message: located + error.reason + kept))
                }
            }
            if memory.lastGood != nil { set.memory[file] = memory }
            guard let parsed = fresh ?? memory.lastGood else { continue }
            // A kept configuration's entry errors were logged when it was read.
            if fresh != nil {
                for entry in parsed.entryErrors + parsed.warnings { set.problems.append("mcp config \(goQuote(file)): \(entry.message)") }
            }
            for server in parsed.servers {
                if let winner = owner[server.name] {
                    set.problems.append("mcp config \(goQuote(file)): server \(goQuote(server.name)) is already declared in \(goQuote(winner))")
                    continue
                }
                owner[server.name] = file
                set.servers.append(server)
            }
        }
        set.servers.sort { bytewisePrecedes($0.name, $1.name) }
        return set
    }

    enum ReadResult: Equatable {
        case missing
        case failed(String)
        case bytes([UInt8])
    }

    /// A regular file's bytes (links followed), at most ``MCPConfigFile/maxFileBytes``.
    static func readConfig(_ path: String) -> ReadResult {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            return errno == ENOENT || errno == ENOTDIR ? .missing : .failed("\(SystemCallError(call: "open", errno: errno))")
        }
        defer { close(fd) }
        guard let info = FileInfo.of(descriptor: fd), info.kind == .regular else { return .failed("not a regular file") }
        let limit = MCPConfigFile.maxFileBytes
        guard info.size <= limit else { return .failed("larger than \(limit) bytes") }
        var bytes = [UInt8](repeating: 0, count: limit + 1)
        var count = 0
        while count <= limit {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, limit + 1 - count) }
            if n < 0, errno == EINTR { continue }
            guard n >= 0 else { return .failed("\(SystemCallError(call: "read", errno: errno))") }
            if n == 0 { break }
            count += n
        }
        guard count <= limit else { return .failed("larger than \(limit) bytes") }
        return .bytes(Array(bytes[..<count]))
    }

    /// Where `bytes` stop being one JSON document, as a 1-based line and column (the column
    /// counts characters); nil when they are JSON (the error is then about its shape).
    static func syntaxLocation(_ bytes: [UInt8]) -> (line: Int, column: Int)? {
        var scanner = JSONSyntaxScanner(bytes: bytes)
        guard !scanner.isDocument() else { return nil }
        let offset = min(scanner.index, bytes.count)
        var line = 1
        var column = 1
        for byte in bytes[..<offset] {
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {
                column += 1
            }
        }
        return (line, column)
    }
}

/// A JSON syntax check that stops at the first byte the grammar refuses (`index`), for
/// locating a parse error; the value itself is not built. Nesting deeper than the parser's
/// bound (256) stops it too, so the recursion is bounded.
struct JSONSyntaxScanner {
    let bytes: [UInt8]
    var index = 0
    private var depth = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    /// Whether the bytes are exactly one JSON value with optional whitespace around it.
    mutating func isDocument() -> Bool {
        skipWhitespace()
        guard value() else { return false }
        skipWhitespace()
        return index == bytes.count
    }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipWhitespace() {
        while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
    }

    private mutating func value() -> Bool {
        guard let byte = current else { return false }
        switch byte {
        case UInt8(ascii: "{"): return container(close: UInt8(ascii: "}"), keyed: true)
        case UInt8(ascii: "["): return container(close: UInt8(ascii: "]"), keyed: false)
        case UInt8(ascii: "\""): return string()
        case UInt8(ascii: "t"): return literal("true")
        case UInt8(ascii: "f"): return literal("false")
        case UInt8(ascii: "n"): return literal("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return number()
        default: return false
        }
    }

    private mutating func container(close: UInt8, keyed: Bool) -> Bool {
        guard depth < 256 else { return false }
        depth += 1
        defer { depth -= 1 }
        index += 1
        skipWhitespace()
        if current == close {
            index += 1
            return true
        }
        while true {
            skipWhitespace()
            if keyed {
                guard current == UInt8(ascii: "\""), string() else { return false }
                skipWhitespace()
                guard current == UInt8(ascii: ":") else { return false }
                index += 1
                skipWhitespace()
            }
            guard value() else { return false }
            skipWhitespace()
            if current == UInt8(ascii: ",") {
                index += 1
                continue
            }
            guard current == close else { return false }
            index += 1
            return true
        }
    }

    private mutating func string() -> Bool {
        index += 1
        while let byte = current {
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return true
            case UInt8(ascii: "\\"):
                index += 1
                guard let escaped = current else { return false }
                if escaped == UInt8(ascii: "u") {
                    for _ in 0..<4 {
                        index += 1
                        guard let hex = current, (hex >= 0x30 && hex <= 0x39) || (hex | 0x20 >= 0x61 && hex | 0x20 <= 0x66) else { return false }
                    }
                } else if !Array("\"\\/bfnrt".utf8).contains(escaped) {
                    return false
                }
                index += 1
            case 0..<0x20:
                return false
            default:
                index += 1
            }
        }
        return false
    }

    private mutating func literal(_ word: StaticString) -> Bool {
        let expected = UnsafeRawBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        for byte in expected {
            guard current == byte else { return false }
            index += 1
        }
        return true
    }

    private mutating func number() -> Bool {
        func isDigit(_ byte: UInt8?) -> Bool { byte.map { $0 >= 0x30 && $0 <= 0x39 } ?? false }
        if current == UInt8(ascii: "-") { index += 1 }
        if current == UInt8(ascii: "0") {
            index += 1
        } else {
            guard isDigit(current) else { return false }
            while isDigit(current) { index += 1 }
        }
        if current == UInt8(ascii: ".") {
            index += 1
            guard isDigit(current) else { return false }
            while isDigit(current) { index += 1 }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard isDigit(current) else { return false }
            while isDigit(current) { index += 1 }
        }
        return true
    }
}
