import AgentCore
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// The atomic write: a temporary file `.<base>.tmp.<8 chars>` beside the
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
        temporary = Self.temporaryPath(for: target)
        let fd = FS.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
        guard fd >= 0 else { throw FileSystemError.last("open", temporary) }
        self.fd = fd
    }

    /// A fresh `.<base>.tmp.<8 chars>` beside `target`.
    static func temporaryPath(for target: String) -> String {
        let directory = parentDirectory(of: target)
        return (directory.isEmpty ? "/" : directory) + "/." + lastPathComponent(of: target) + ".tmp." + UUIDText.random().prefix(8)
    }

    deinit {
        if !finished {
            close(fd)
            FS.unlink(temporary)
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

    /// Closes, keeps the target's mode (and, when the agent runs as root, its owner), and
    /// renames over the target. A target that is not a regular file, or that the agent could
    /// not open for writing, is refused: the rename must not do what a plain write could not.
    /// Other hard links to the target keep the old content (the rename makes a new inode).
    func commit() throws(FileSystemError) {
        finished = true
        defer { FS.unlink(temporary) }
        let replaced: stat?
        do { replaced = try Self.checkReplaceable(target) } catch {
            // `finished` is set: nothing else closes the descriptor now.
            close(fd)
            throw error
        }
        if let existing = replaced {
            // The owner first: a chown clears the set-user-ID and set-group-ID bits (even
            // for root), so the mode goes after it.
            if geteuid() == 0, existing.st_uid != 0 || existing.st_gid != 0 {
                guard fchown(fd, existing.st_uid, existing.st_gid) == 0 else {
                    let error = FileSystemError.last("chown", temporary)
                    close(fd)
                    throw error
                }
            }
            // The reference only logs a failure here.
            _ = fchmod(fd, existing.st_mode & 0o7777)
        }
        guard close(fd) == 0 else { throw FileSystemError.last("close", temporary) }
        guard FS.rename(temporary, target) == 0 else { throw FileSystemError.last("write", target) }
    }

    /// The existing target's status, nil when there is none; throws when it is not a
    /// regular file (EISDIR, or EINVAL for a FIFO, socket or device) or cannot be opened
    /// for writing (the 403 a plain write would get).
    static func checkReplaceable(_ target: String) throws(FileSystemError) -> stat? {
        // O_NONBLOCK: a FIFO without a reader answers at once (ENXIO) instead of blocking.
        let probe = FS.open(target, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        if probe < 0 {
            let code = errno
            if code == ENOENT { return nil }
            var info = stat()
            if FS.stat(target, &info) == 0, info.st_mode & S_IFMT != S_IFREG {
                throw FileSystemError(operation: "open", path: target, code: info.st_mode & S_IFMT == S_IFDIR ? EISDIR : EINVAL)
            }
            throw FileSystemError(operation: "open", path: target, code: code)
        }
        defer { close(probe) }
        var info = stat()
        guard fstat(probe, &info) == 0 else { throw FileSystemError.last("stat", target) }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw FileSystemError(operation: "open", path: target, code: info.st_mode & S_IFMT == S_IFDIR ? EISDIR : EINVAL)
        }
        return info
    }

    /// Gives up: the temporary file goes, the target stays.
    func abandon() {
        guard !finished else { return }
        finished = true
        close(fd)
        FS.unlink(temporary)
    }
}
