import AgentCore
import CoreMetrics
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// An append-only file of JSON lines that its owner compacts by rewriting it whole (the
/// process records and the tool-call claims). An append is one `write` on an `O_APPEND`
/// descriptor and succeeds only if the whole line was written; a failed or short one
/// (ENOSPC) is cut off again (a torn line would swallow the next one when read back), the
/// error is thrown, and the owner's next change rewrites the file from its state, so one
/// failure never silently ends the recording. A torn last line (a crash mid-write) is
/// skipped when read back. Syncing is the owner's choice (``syncDescriptor()``,
/// `rewrite(_:sync:)`).
///
/// Not thread-safe: its owner calls it under its own lock.
struct JSONLinesLog: ~Copyable {
    let path: String
    /// Largest file read back.
    let maxFileBytes: Int
    private var fd: Int32 = -1
    /// Lines in the file (compaction is due when they are many more than the live ones).
    private(set) var lines = 0

    init(path: String, maxFileBytes: Int) {
        self.path = path
        self.maxFileBytes = maxFileBytes
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    /// Every line of the file that decodes as `Line` (others, such as a torn last line, are skipped).
    func read<Line: Decodable>(_ type: Line.Type) -> [Line] {
        guard let bytes = AtomicFile.read(path, maxBytes: maxFileBytes) else { return [] }
        let decoder = JSONDecoder()
        return bytes.split(separator: UInt8(ascii: "\n")).compactMap { try? decoder.decode(Line.self, from: Data($0)) }
    }

    /// Open for appending (not broken by a failed write).
    var isOpen: Bool { fd >= 0 }

    /// Whether the next change should rewrite the file: it could not be written, or it holds
    /// more than twice the live lines (and 1024 more).
    func needsRewrite(live: Int) -> Bool {
        fd < 0 || lines > 2 * live + 1024
    }

    /// Appends one line, whole, or throws (the file is then rewritten at the next change).
    mutating func append(_ line: some Encodable) throws(SystemCallError) {
        guard fd >= 0 else { throw SystemCallError(call: "open \(path)", errno: EBADF) }
        guard var bytes = try? CompactJSONEncoder().encode(line) else { throw SystemCallError(call: "encode", errno: EINVAL) }
        bytes.append(UInt8(ascii: "\n"))
        var written = -1
        var code: Int32 = 0
        repeat {
            written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            code = written < 0 ? errno : 0
        } while written < 0 && code == EINTR
        guard written == bytes.count else {
            // A short write is the disk running out (the next write would say ENOSPC). The
            // appended part ends at the descriptor's offset (O_APPEND): cut it off again. (Asked
            // only on failure: an `lseek` per append was a system call on every start and exit.)
            if written > 0, case let end = lseek(fd, 0, SEEK_CUR), end >= written { _ = ftruncate(fd, end - off_t(written)) }
            markBroken()
            throw SystemCallError(call: "write", errno: written < 0 ? code : ENOSPC)
        }
        lines += 1
    }

    /// A descriptor of the file for `fdatasync` off the owner's lock (the caller closes it);
    /// -1 if there is none.
    func syncDescriptor() -> Int32 {
        fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 0)
    }

    /// Closes the file: the next change rewrites it from the owner's state (after a line
    /// that was written but could not be synced).
    mutating func markBroken() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    /// Replaces the file with `content` (atomically) and reopens it for appending; with
    /// `sync`, the new file and its directory entry are on disk before it returns.
    mutating func rewrite(_ content: [some Encodable], sync: Bool = false) throws(SystemCallError) {
        markBroken()
        var out: [UInt8] = []
        let encoder = CompactJSONEncoder()
        for line in content {
            guard (try? encoder.encode(line, into: &out)) != nil else { continue }
            out.append(UInt8(ascii: "\n"))
        }
        try AtomicFile.write(out, to: path, sync: sync)
        if sync { try Self.syncDirectory(of: path) }
        lines = content.count
        fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 { throw SystemCallError(call: "open \(path)", errno: errno) }
    }

    /// `fsync` of the directory holding `path`, so a rename in it is on disk.
    private static func syncDirectory(of path: String) throws(SystemCallError) {
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        let dfd = open(directory.isEmpty ? "/" : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dfd >= 0 else { throw SystemCallError(call: "open \(directory)", errno: errno) }
        defer { close(dfd) }
        if fsync(dfd) != 0 { throw SystemCallError(call: "fsync \(directory)", errno: errno) }
    }
}
