import AgentCore
import AgentHTTP
import Hummingbird
import Dispatch

#if canImport(Glibc)
import Glibc
#endif

/// Content hashes for compare-and-swap (beyond the reference): reads report the file's
/// SHA-256 and mtime, writes and edits accept the hash the client last saw and refuse with
/// 409 when the file changed meanwhile, and report the new hash.
enum ContentHash {
    /// Files and bodies up to this size are hashed on every read and write; larger ones
    /// only when a client sends an expected hash (hashing costs CPU time per byte).
    static let automaticLimit = 16 << 20

    /// The SHA-256 (hex) of the regular file at `path`; "" when it does not exist. A file
    /// that grows past its reported size (or a pseudo-file past ``automaticLimit``) by more
    /// than that limit hashes as "" (unknown), which no expected hash matches.
    static func ofFile(_ path: String, token: CancelToken? = nil) throws -> String {
        let file: RegularFile
        do throws(RegularFile.Failure) { file = try RegularFile(path: path) } catch {
            switch error {
            case .system(let failure) where failure.code == ENOENT: return ""
            case .system(let failure): throw failure
            case .notRegular(let isDirectory): throw FileSystemError(operation: "open", path: path, code: isDirectory ? EISDIR : EINVAL)
            }
        }
        // Saturating: a sparse file may report a size near Int.max.
        let (limit, overflow) = file.size.addingReportingOverflow(automaticLimit)
        return try file.sha256(limit: overflow ? .max : limit, path: path, token: token) ?? ""
    }

    /// Whether the regular file at `path` still holds exactly `original` (false when it is
    /// gone or not a regular file). A byte comparison, cheaper than hashing both sides.
    static func isUnchanged(_ path: String, from original: [UInt8], token: CancelToken? = nil) throws -> Bool {
        guard let file = try? RegularFile(path: path) else { return false }
        return try file.holds(original, path: path, token: token)
    }

    /// A client's expected hash: nil when absent or empty (no condition), else 64 hex digits
    /// (either case; compared lower-case). Anything else is a 400 naming `field` (a JSON
    /// path, or the query parameter): no file has such a hash, so it is a mistake, not a
    /// conflict.
    static func expected(_ text: String?, field: String, in message: String) throws(APIError) -> String? {
        guard let text, !text.isEmpty else { return nil }
        let hex = text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0 | 0x20) }
        guard text.utf8.count == 64, hex else {
            throw APIError(
                .badRequest, message,
                validations: [.init(field: field, detail: "\(field) must be a SHA-256 in 64 hexadecimal digits (got \(text.utf8.count) characters)")])
        }
        return text.lowercased()
    }

    /// Modification time in nanoseconds since the epoch.
    static func mtime(_ info: stat) -> Int64 {
        Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
    }

    struct ConflictEntry: Encodable, Sendable {
        var path: String
        var currentSHA256: String

        enum CodingKeys: String, CodingKey {
            case path, currentSHA256 = "current_sha256"
        }
    }

    /// The 409 answer: which files changed and their hashes now.
    struct Conflict: Error, Encodable, Sendable {
        var message = "File changed since it was read."
        var detail = "The expected sha256 does not match the file's content now; nothing was written."
        var files: [ConflictEntry]

        var response: Response { JSONResponse.make(self, status: .conflict) }
    }
}

/// Serializes the check-then-rename of writes and edits per target, so that two writers
/// holding the same expected hash cannot both win. Striped by path: a slow commit (hashing
/// a large file) holds up only the few paths that share its stripe, never the whole API.
enum CommitLocks {
    static let stripeCount = 64
    private static let stripes = (0..<stripeCount).map { _ in DispatchSemaphore(value: 1) }

    private static func stripe(_ path: String) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in path.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return Int(hash % UInt64(stripeCount))
    }

    /// Runs `body` holding the stripes of every path (taken in order: no deadlock).
    static func withLocks<T>(_ paths: [String], _ body: () throws -> T) throws -> T {
        let indices = Set(paths.map(stripe)).sorted()
        for index in indices { stripes[index].wait() }
        defer { for index in indices.reversed() { stripes[index].signal() } }
        return try body()
    }
}
