import AgentCore
import AgentHTTP
import Hummingbird
import Synchronization

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

    /// Serializes the check-then-rename of writes and edits, so that two writers holding
    /// the same expected hash cannot both win.
    static let commits = Mutex(())

    /// The SHA-256 (hex) of the file at `path`; "" when it does not exist.
    static func ofFile(_ path: String) throws(FileSystemError) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return "" }
            throw FileSystemError.last("open", path)
        }
        defer { close(fd) }
        var hasher = SHA256()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileSystemError.last("read", path)
            }
            if n == 0 { break }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
        return SHA256.hexString(hasher.finalize())
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
