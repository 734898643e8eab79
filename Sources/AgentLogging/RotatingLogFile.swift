import AgentCore
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// The agent's log file, `coder-agent.log`, rotated as the reference's lumberjack writer does:
/// past ``maxBytes`` it becomes `coder-agent-<UTC 2006-01-02T15-04-05.000>.log` and a new one
/// starts; only the newest ``maxBackups`` backups are kept, none compressed.
///
/// Memory: no buffer (each line is one `write(2)` under the lock); a rotation lists the
/// directory once and keeps only the names of this file's backups.
public final class RotatingLogFile: Sendable {
    /// The reference's sizes: 5 MiB a file, 19 backups (about 100 MiB in all).
    public static let defaultMaxBytes = 5 << 20
    public static let defaultMaxBackups = 19
    /// After a failed open, the next try waits this long (a missing directory must not cost
    /// a system call per log line).
    static let retryInterval: Duration = .seconds(10)

    public let directory: String
    /// The file's name, `coder-agent.log`; backups are `<stem>-<time><ext>`.
    public let name: String
    public let maxBytes: Int
    public let maxBackups: Int
    private let stem: String
    private let ext: String

    private struct State {
        var fd: Int32 = -1
        var size = 0
        var retryAt: ContinuousClock.Instant?
        var reported = false
    }

    private let state = Mutex(State())
    /// The time used in backup names (injected by tests).
    private let now: @Sendable () -> timespec

    public init(
        directory: String, name: String = "coder-agent.log", maxBytes: Int = RotatingLogFile.defaultMaxBytes,
        maxBackups: Int = RotatingLogFile.defaultMaxBackups, now: @escaping @Sendable () -> timespec = RotatingLogFile.wallClock
    ) {
        self.directory = directory.count > 1 && directory.hasSuffix("/") ? String(directory.dropLast()) : directory
        self.name = name
        self.maxBytes = max(1, maxBytes)
        self.maxBackups = max(0, maxBackups)
        if let dot = name.lastIndex(of: "."), dot != name.startIndex {
            stem = String(name[..<dot])
            ext = String(name[dot...])
        } else {
            stem = name
            ext = ""
        }
        self.now = now
    }

    deinit {
        let fd = state.withLock { $0.fd }
        if fd >= 0 { close(fd) }
    }

    public var path: String { directory + "/" + name }

    /// Appends `line` and a newline; a line longer than the file may hold is cut to it.
    /// Failures are reported once on stderr and the line is dropped.
    public func write(_ line: String) {
        var bytes = Array(line.utf8.prefix(maxBytes - 1))
        bytes.append(0x0A)
        state.withLock { s in
            if s.fd < 0 {
                if let retryAt = s.retryAt, ContinuousClock.now < retryAt { return }
                guard open(&s) else { return }
            }
            if s.size + bytes.count > maxBytes {
                rotate(&s)
                guard s.fd >= 0 else { return }
            }
            let written = Self.writeBytes(s.fd, bytes)
            s.size += written
        }
    }

    /// Opens the file (creating the directory, mode 0755, and the file, 0600, as lumberjack
    /// does); an existing file is appended to. Only a regular file, opened without following
    /// a link and without blocking: the default directory is a shared `/tmp`, where a FIFO at
    /// the name blocked the open, and with it every thread that logs, for ever, and a link
    /// sent the agent's lines into whatever file it named.
    private func open(_ s: inout State) -> Bool {
        makeDirectories(directory)
        guard let fd = openRegular(O_WRONLY | O_APPEND | O_CREAT, mode: 0o600, &s) else { return false }
        var info = stat()
        s.size = fstat(fd, &info) == 0 ? Int(info.st_size) : 0
        s.fd = fd
        s.retryAt = nil
        return true
    }

    /// `path` opened with `flags` (and no link followed, no blocking), if it is a regular file.
    private func openRegular(_ flags: Int32, mode: mode_t, _ s: inout State) -> Int32? {
        let fd = Glibc.open(path, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, mode)
        guard fd >= 0 else {
            failed(&s, "cannot open \(path): \(SystemCallError.message(errno))")
            return nil
        }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            failed(&s, "cannot open \(path): not a regular file")
            return nil
        }
        return fd
    }

    /// Moves the file to its backup name, starts a new one with the old one's mode, and
    /// removes the backups beyond ``maxBackups``.
    private func rotate(_ s: inout State) {
        close(s.fd)
        s.fd = -1
        s.size = 0
        var info = stat()
        let mode = stat(path, &info) == 0 ? info.st_mode & 0o7777 : 0o600
        if access(path, F_OK) == 0 {
            // Two rotations within a millisecond (a tiny limit) must not overwrite a backup.
            var time = now()
            var backup = backupPath(time)
            for _ in 0..<1000 where access(backup, F_OK) == 0 {
                time.tv_nsec += 1_000_000
                if time.tv_nsec >= 1_000_000_000 { time.tv_sec += 1; time.tv_nsec -= 1_000_000_000 }
                backup = backupPath(time)
            }
            if rename(path, backup) != 0 {
                failed(&s, "cannot rename \(path): \(SystemCallError.message(errno))")
                return
            }
        }
        // A new file: whatever appeared at the name since the rename is not taken over.
        guard let fd = openRegular(O_WRONLY | O_APPEND | O_CREAT | O_EXCL, mode: mode, &s) else { return }
        s.fd = fd
        removeOldBackups()
    }

    private func failed(_ s: inout State, _ message: String) {
        s.retryAt = .now + Self.retryInterval
        if !s.reported {
            s.reported = true
            writeAll(2, "workspace-agent: log file: \(message); retrying every \(Self.retryInterval)\n")
        }
    }

    /// `<dir>/<stem>-2006-01-02T15-04-05.000<ext>` for `time`, in UTC.
    func backupPath(_ time: timespec) -> String {
        directory + "/" + stem + "-" + Self.backupTimestamp(time) + ext
    }

    /// Go's `2006-01-02T15-04-05.000` in UTC.
    static func backupTimestamp(_ time: timespec) -> String {
        var seconds = time.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return pad(parts.tm_year + 1900, 4) + "-" + pad(parts.tm_mon + 1, 2) + "-" + pad(parts.tm_mday, 2) + "T"
            + pad(parts.tm_hour, 2) + "-" + pad(parts.tm_min, 2) + "-" + pad(parts.tm_sec, 2) + "."
            + pad(Int32(time.tv_nsec / 1_000_000), 3)
    }

    /// Whether `file` is one of this log's backups (its time part has the backup format).
    func isBackup(_ file: String) -> Bool {
        let prefix = stem + "-"
        guard file.hasPrefix(prefix), file.hasSuffix(ext), file.count == prefix.count + 23 + ext.count else { return false }
        let time = Array(file.utf8.dropFirst(prefix.utf8.count).prefix(23))
        let shape = Array("0000-00-00T00-00-00.000".utf8)
        for (byte, expected) in zip(time, shape) {
            if expected == UInt8(ascii: "0") ? !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) : byte != expected { return false }
        }
        return true
    }

    /// Removes the oldest backups beyond ``maxBackups`` (names sort as their times).
    private func removeOldBackups() {
        guard let dir = opendir(directory) else { return }
        var backups: [String] = []
        while let entry = readdir(dir) {
            let file = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if isBackup(file) { backups.append(file) }
        }
        closedir(dir)
        guard backups.count > maxBackups else { return }
        // Only the agent's own: a name like a backup's another user made is not its to remove.
        for file in backups.sorted().dropLast(maxBackups) {
            let path = directory + "/" + file
            var info = stat()
            if lstat(path, &info) == 0, info.st_uid == geteuid(), info.st_mode & S_IFMT == S_IFREG { unlink(path) }
        }
    }

    /// `mkdir -p` with mode 0755 for what it creates.
    private func makeDirectories(_ path: String) {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            prefix += "/" + component
            _ = mkdir(prefix, 0o755)
        }
    }

    private static func writeBytes(_ fd: Int32, _ bytes: [UInt8]) -> Int {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n < 0, errno == EINTR { continue }
                guard n > 0 else { break }
                offset += n
            }
            return offset
        }
    }

    /// The wall clock (`CLOCK_REALTIME`).
    public static let wallClock: @Sendable () -> timespec = {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return time
    }
}
