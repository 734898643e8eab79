import AgentCore
import Glibc

/// The servers of the configured `.mcp.json` files, merged: files in list order, the first
/// file to declare a name wins it (later ones are dropped with a log line), missing files
/// are skipped, a file that cannot be read or parsed is logged and skipped, and an entry
/// that is not valid costs only itself.
struct MCPConfigSet: Sendable, Equatable {
    /// One file's identity for change detection: nil when it does not exist.
    struct Fingerprint: Sendable, Equatable {
        var size: Int
        var modifiedNanoseconds: Int64
    }

    var servers: [MCPServerConfig] = []
    /// What was wrong, one line each, for the log.
    var problems: [String] = []

    /// The fingerprint of each file (links followed).
    static func fingerprints(_ files: [String]) -> [String: Fingerprint?] {
        var out: [String: Fingerprint?] = [:]
        for file in files {
            out[file] = FileInfo.following(path: file).map { Fingerprint(size: $0.size, modifiedNanoseconds: $0.modifiedNanoseconds) }
        }
        return out
    }

    /// Reads and merges `files`; `environment` answers the `$VAR`s of `env` values.
    static func load(_ files: [String], environment: (String) -> String?) -> MCPConfigSet {
        var set = MCPConfigSet()
        var owner: [String: String] = [:]
        for file in files {
            let bytes: [UInt8]
            switch readConfig(file) {
            case .missing: continue
            case .failed(let reason):
                set.problems.append("mcp config \(goQuote(file)): \(reason)")
                continue
            case .bytes(let read): bytes = read
            }
            let parsed: MCPConfigFile
            do {
                parsed = try MCPConfigFile.parse(bytes, environment: environment)
            } catch {
                set.problems.append("mcp config \(goQuote(file)): \(error.reason)")
                continue
            }
            for entry in parsed.entryErrors {
                set.problems.append("mcp config \(goQuote(file)): \(entry.message)")
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
}
