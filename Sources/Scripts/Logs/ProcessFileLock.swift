import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// An exclusive lock on a file held by this process, which no child can keep: a POSIX
/// record lock (`fcntl(F_SETLK)`, write, whole file) keeps other processes out, and a
/// registry of the files this process has locked keeps out a second taker in this one.
///
/// Why not `flock`: a flock belongs to the open file description, which every child shares
/// from fork until it execs or exits (close-on-exec only closes at exec). A child being
/// spawned by any thread (a script, another test) then keeps the lock of a file closed in
/// the meantime, and reopening it fails. A record lock belongs to the process and is never
/// inherited by fork. Its two catches, which the registry covers: it does not keep the same
/// process out, and closing *any* descriptor of the file drops it — so a taker refused by
/// the registry never opens the file, and the locked descriptor is closed only through
/// ``close(_:)``. Nothing else in the process may open a locked file.
///
/// Other processes are kept out only if they lock the same way (`fcntl`/`lockf`, as another
/// agent does): Linux keeps `flock` and record locks apart.
enum ProcessFileLock {
    enum Failure: Error, Equatable {
        /// Another process, or a taker in this one, holds the lock.
        case held
        case system(call: String, errno: Int32)
    }

    /// A file by identity: device and inode (two paths to one file are one key).
    private struct FileID: Hashable {
        let device: UInt64
        let inode: UInt64

        init(_ info: stat) {
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
        }
    }

    /// A locked file: the descriptor that holds the lock, and descriptors of the same file
    /// opened by a taker that lost a race with a rename (see ``open(_:mode:)``), kept open
    /// until the lock is released because closing one would drop the lock.
    private struct Holder {
        let fd: Int32
        var parked: [Int32] = []
    }

    /// Every file this process holds locked. Bounded by the locks held (one per open
    /// journal) plus the parked descriptors (one per lost race, which takes an outside
    /// process renaming a locked file over the path being opened).
    private static let registry = Mutex<[FileID: Holder]>([:])

    /// Opens `path` read-write (created with `mode` if missing; close-on-exec) and locks it.
    /// The descriptor is closed only through ``close(_:)``. Throws ``Failure/held`` at once
    /// when the lock is taken (no waiting).
    static func open(_ path: String, mode: mode_t) throws(Failure) -> Int32 {
        try registry.withLock { held throws(Failure) -> Int32 in
            // Checked before opening: a refused taker must not open (and close) the file.
            var info = stat()
            if stat(path, &info) == 0, held[FileID(info)] != nil { throw .held }
            let fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC, mode)
            guard fd >= 0 else { throw .system(call: "open", errno: errno) }
            guard fstat(fd, &info) == 0 else {
                let code = errno
                Glibc.close(fd)
                throw .system(call: "fstat", errno: code)
            }
            let id = FileID(info)
            if held[id] != nil {
                // The path was renamed to a locked file after the check above.
                held[id]?.parked.append(fd)
                throw .held
            }
            var lock = flock()
            lock.l_type = Int16(F_WRLCK)
            lock.l_whence = Int16(SEEK_SET)
            lock.l_start = 0
            lock.l_len = 0
            while fcntl(fd, F_SETLK, &lock) != 0 {
                let code = errno
                if code == EINTR { continue }
                Glibc.close(fd)
                if code == EACCES || code == EAGAIN { throw .held }
                throw .system(call: "fcntl F_SETLK", errno: code)
            }
            held[id] = Holder(fd: fd)
            return fd
        }
    }

    /// Closes a descriptor from ``open(_:mode:)``, releasing its lock (and what was parked
    /// with it).
    static func close(_ fd: Int32) {
        registry.withLock { held in
            var info = stat()
            if fstat(fd, &info) == 0, let holder = held[FileID(info)], holder.fd == fd {
                held[FileID(info)] = nil
                for parked in holder.parked { Glibc.close(parked) }
            }
            Glibc.close(fd)
        }
    }
}
