#if canImport(Glibc)
import Glibc
#endif

/// Small files replaced whole: written to a temporary name beside the target and renamed
/// over it, so a reader (or the next agent after a crash) sees the old content or the new,
/// never a mix. Without `sync` the data is only as durable as the page cache: enough to
/// survive the agent's own crash or restart, not the machine's.
public enum AtomicFile {
    /// Writes `bytes` to `path` (mode `mode`), atomically; throws the failing call.
    public static func write(_ bytes: [UInt8], to path: String, mode: mode_t = 0o600, sync: Bool = false) throws(SystemCallError) {
        let temporary = path + ".tmp"
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode)
        guard fd >= 0 else { throw SystemCallError(call: "open", errno: errno) }
        var failure: SystemCallError?
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = SystemCallError(call: "write", errno: errno)
                    return
                }
                offset += n
            }
        }
        if failure == nil, sync, fsync(fd) != 0 { failure = SystemCallError(call: "fsync", errno: errno) }
        close(fd)
        if failure == nil, rename(temporary, path) != 0 { failure = SystemCallError(call: "rename", errno: errno) }
        if let failure {
            unlink(temporary)
            throw failure
        }
    }

    /// The file's bytes, or nil when it is missing, not a regular file (links are not
    /// followed), unreadable or larger than `maxBytes`.
    public static func read(_ path: String, maxBytes: Int) -> [UInt8]? {
        // Without blocking: opening a FIFO for reading would wait for a writer (on an event
        // loop, for ever); it is refused below as not a regular file.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, Int(info.st_size) <= maxBytes else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + offset, $0.count - offset, off_t(offset)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            offset += n
        }
        return Array(bytes[0..<offset])
    }
}
