import AgentCore
import Glibc
import Synchronization

/// All spools under one directory, with the shared total cap.
///
/// Layout: `<directory>/<id>/` (0700) per spool, holding segment files named by their
/// starting logical offset (16 lowercase hex digits, 0600), a 32-byte `cursor` file, and
/// whatever record files the caller keeps there.
///
/// Disk bound (stated and tested): let W be the number of spools currently being written
/// (created, not finished, holding a segment). Then, at all times,
///   - sum of segment file sizes in the store ≤ `totalBytes` ≤ max(`maxTotalBytes`, W × `segmentBytes`),
///   - each spool created by this store has ≤ max(1, maxBytesPerSpool / segmentBytes) segments,
///     so its segment files total ≤ `maxBytesPerSpool` (kept bytes `end - dropped` likewise),
///   plus one 32-byte `cursor` file per spool and the caller's own files (not counted).
/// A segment being written is charged its full `segmentBytes` from creation; a finished one
/// is trimmed to and charged its real size. Only segments of spools this store created or
/// restored are counted: directories never `restore`d are neither counted nor touched.
///
/// Crash guarantee: after SIGKILL of the process (page cache intact), `restore(id:)` in a
/// new store yields exactly the bytes `[dropped, end)` of the last completed `append`
/// (`dropped` may be larger than last seen in memory if an eviction had already removed a
/// segment). There is no fsync: after power loss or a kernel crash, `restore` still never
/// returns wrong bytes (it verifies files and drops what it cannot prove), but data may be lost.
///
/// Ownership: the store deletes only segment-named regular files, `cursor`, and the extra
/// names given to `init(extraOwnedFiles:)` / `remove(id:alsoDeleting:)`, then `rmdir`s; it
/// never deletes recursively and opens files with `O_NOFOLLOW | O_CLOEXEC`. (Spool
/// directories are checked with `lstat` when created/restored; the store directory is
/// assumed not writable by others, so a later swap of a spool directory for a symlink is
/// out of scope.)
public final class OutputSpoolStore: Sendable {
    /// Size limits. Requirements: `segmentBytes >= 1`, `maxBytesPerSpool >= segmentBytes`,
    /// `maxTotalBytes >= segmentBytes`, `segmentBytes <= 1 GiB`.
    public struct Limits: Sendable, Equatable {
        /// Size of one segment file; 1 MiB default (recycling 1 MiB files measured ~15 GB/s).
        public var segmentBytes = 1 << 20
        /// Per-spool cap on kept bytes / segment files (rounded down to whole segments).
        public var maxBytesPerSpool = 8 << 20
        /// Store-wide cap on segment bytes (see the disk bound above).
        public var maxTotalBytes = 256 << 20

        public init(segmentBytes: Int = 1 << 20, maxBytesPerSpool: Int = 8 << 20, maxTotalBytes: Int = 256 << 20) {
            self.segmentBytes = segmentBytes
            self.maxBytesPerSpool = maxBytesPerSpool
            self.maxTotalBytes = maxTotalBytes
        }
    }

    public let directory: String
    public let limits: Limits
    let state: Mutex<StoreState>

    /// Opens (creating 0700 if missing) the store directory. `extraOwnedFiles` are file names
    /// the caller keeps in spool directories (e.g. `["record.json"]`) that `remove(id:)` may delete.
    /// `onWriteError` is told of every failed write (under the store's lock).
    public init(
        directory: String, limits: Limits = .init(), extraOwnedFiles: [String] = [],
        onWriteError: (@Sendable (SystemCallError) -> Void)? = nil
    ) throws {
        guard limits.segmentBytes >= 1, limits.segmentBytes <= 1 << 30,
            limits.maxBytesPerSpool >= limits.segmentBytes, limits.maxTotalBytes >= limits.segmentBytes
        else { throw SpoolError.invalidLimits }
        var dir = directory
        while dir.count > 1 && dir.hasSuffix("/") { dir.removeLast() }
        try Posix.makeDirectories(dir)
        let extras = Set(extraOwnedFiles.filter { !$0.isEmpty && !$0.contains("/") && $0 != "." && $0 != ".." })
        self.directory = dir
        self.limits = limits
        self.state = Mutex(StoreState(directory: dir, limits: limits, extraOwnedFiles: extras, onWriteError: onWriteError))
    }

    /// Creates `<directory>/<id>/` (0700) with an empty cursor and returns its writer handle.
    /// `id` must match `[0-9a-f-]{1,64}`; throws if it is invalid or the spool/directory exists.
    public func create(id: String) throws -> OutputSpool {
        guard Posix.isValidID(id) else { throw SpoolError.invalidID(id) }
        let result: Result<(Int, String), SpoolError> = state.withLock { s in
            if s.keys[id] != nil { return .failure(.alreadyExists(id)) }
            let dir = s.directory + "/" + id
            if mkdir(dir, Posix.dirMode) != 0 {
                return .failure(errno == EEXIST ? .alreadyExists(id) : .system(call: "mkdir", path: dir, errno: errno))
            }
            let cfd = Posix.create(dir + "/cursor", exclusive: true)
            guard cfd >= 0 else {
                let e = errno
                rmdir(dir)
                return .failure(.system(call: "open", path: dir + "/cursor", errno: e))
            }
            _ = SpoolCursor(dropped: 0, end: 0).write(to: cfd)
            var sp = SpoolState(id: id, directory: dir)
            sp.cursorFD = cfd
            let key = s.nextKey
            s.nextKey += 1
            s.keys[id] = key
            s.spools[key] = sp
            return .success((key, dir))
        }
        let (key, dir) = try result.get()
        return OutputSpool(store: self, key: key, id: id, directory: dir, isWriter: true)
    }

    /// Reopens a spool left on disk by an earlier process as a finished, read-only spool
    /// (see `StoreState.restore` for the checks). Returns nil if the id is invalid, the
    /// directory is missing, or the cursor is unusable. If the id is already open in this
    /// store, returns a read-only handle to it.
    public func restore(id: String) -> OutputSpool? {
        guard Posix.isValidID(id) else { return nil }
        guard let key = state.withLock({ s in s.restore(id: id) }) else { return nil }
        return OutputSpool(store: self, key: key, id: id, directory: directory + "/" + id, isWriter: false)
    }

    /// Ids of the spool directories present on disk (valid id names that are real directories).
    public func storedIDs() -> [String] {
        Posix.listDirectory(directory).filter { name in
            guard Posix.isValidID(name), let st = Posix.lstatInfo(directory + "/" + name) else { return false }
            return Posix.isDirectory(st)
        }.sorted()
    }

    /// Deletes the spool's segment files, its `cursor`, the store's `extraOwnedFiles` and
    /// `alsoDeleting` (regular files only), then removes the directory if it is now empty.
    /// Unknown files are left alone (and then the directory stays). An open handle's reads
    /// return nothing afterwards and its appends are ignored.
    public func remove(id: String, alsoDeleting: [String] = []) {
        guard Posix.isValidID(id) else { return }
        let extra = Set(alsoDeleting.filter { !$0.isEmpty && !$0.contains("/") && $0 != "." && $0 != ".." })
        state.withLock { s in s.remove(id: id, extra: extra) }
    }

    /// Removes what is in the store's directory but cannot be a spool, before any spool is
    /// made (at start): entries that are not directories (a symlink is removed itself, never
    /// followed; so are regular files and the rest), and directories whose name is not a
    /// spool id once they are empty. A directory holding anything is left as it is (its
    /// content is not the store's), and so are spool-named directories (``restore(id:)``
    /// and ``remove(id:alsoDeleting:)`` judge those). Works through the directory's own
    /// descriptor, so nothing outside it is ever touched. Returns the names removed and
    /// the names left.
    public func removeStrays() -> (removed: [String], left: [String]) {
        state.withLock { s in
            let dfd = Posix.retryEINTR { open(s.directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            guard dfd >= 0 else { return ([], []) }
            defer { close(dfd) }
            var removed: [String] = []
            var left: [String] = []
            for name in Posix.listDirectory(s.directory) {
                guard let info = FileInfo.of(name: name, inDirectory: dfd) else { continue }
                if info.kind == .directory {
                    if Posix.isValidID(name) { continue }
                    if unlinkat(dfd, name, AT_REMOVEDIR) == 0 { removed.append(name) } else { left.append(name) }
                } else if unlinkat(dfd, name, 0) == 0 {
                    removed.append(name)
                } else {
                    left.append(name)
                }
            }
            return (removed, left)
        }
    }

    /// Bytes of segment files currently charged against `maxTotalBytes`.
    public var totalBytes: Int { state.withLock { $0.total } }

    public var counters: SpoolCounters { state.withLock { $0.counters } }
}
