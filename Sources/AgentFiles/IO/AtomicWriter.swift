import AgentCore
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// The atomic write of spec file-api §1: a temporary file `.<base>.tmp.<8 chars>` beside the
/// target (O_EXCL, 0666 before the umask), the content, the old mode kept, then a rename over
/// the target. Any failure removes the temporary file and leaves the target as it was.
///
/// Memory: the writer holds no content; callers hand it one chunk at a time.
final class AtomicWriter: @unchecked Sendable {
    // @unchecked: the descriptor and paths are set in init and only used by one caller at a
    // time (a write request's own task, through BlockingIO calls it awaits one by one).
    let target: String
    let temporary: String
    private let fd: Int32
    private var finished = false

    /// Creates the temporary file for `target` (already resolved; its parent exists).
    init(target: String) throws(FileSystemError) {
        self.target = target
        let directory = parentDirectory(of: target)
        let base = lastPathComponent(of: target)
        let suffix = UUID().uuidString.prefix(8).lowercased()
        temporary = (directory.isEmpty ? "/" : directory) + "/." + base + ".tmp." + suffix
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
        guard fd >= 0 else { throw FileSystemError.last("open", temporary) }
        self.fd = fd
    }

    deinit {
        if !finished {
            close(fd)
            unlink(temporary)
        }
    }

    /// Appends bytes.
    func write(_ bytes: UnsafeRawBufferPointer) throws(FileSystemError) {
        var offset = 0
        while offset < bytes.count {
            let n = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                throw FileSystemError.last("write", temporary)
            }
            offset += n
        }
    }

    /// Closes, keeps the target's mode, and renames over the target.
    func commit() throws(FileSystemError) {
        finished = true
        defer { unlink(temporary) }
        guard close(fd) == 0 else { throw FileSystemError.last("close", temporary) }
        var info = stat()
        if stat(target, &info) == 0 {
            // The reference only logs a failure here.
            _ = chmod(temporary, info.st_mode & 0o7777)
        }
        guard rename(temporary, target) == 0 else { throw FileSystemError.last("write", target) }
    }

    /// Gives up: the temporary file goes, the target stays.
    func abandon() {
        guard !finished else { return }
        finished = true
        close(fd)
        unlink(temporary)
    }
}
