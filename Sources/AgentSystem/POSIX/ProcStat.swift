#if canImport(Glibc)
import Glibc
#endif

/// The fields of `/proc/<pid>/stat` the agent reads (state, parent, process group, session),
/// and a walk over `/proc`'s processes: one parser for the agent-ancestor check, the session
/// signals at shutdown and the MCP engine's group sweep.
///
/// Bounds: 512 bytes of each `stat` (the fields read come long before); at most the walk's
/// `limit` entries of `/proc`.
public struct ProcStat: Sendable, Equatable {
    /// The state letter (`R`, `S`, `Z`, ...).
    public var state: UInt8
    public var parent: pid_t
    public var group: pid_t
    public var session: pid_t

    /// Dead (a zombie, or being torn down): its parent has yet to reap it.
    public var isDead: Bool { state == UInt8(ascii: "Z") || state == UInt8(ascii: "X") }

    /// `pid (comm) state ppid pgrp session ...`, read after the command name's last `)`
    /// (the name may hold spaces and parentheses).
    public init?(statLine: some BidirectionalCollection<UInt8>) {
        guard let close = statLine.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = statLine[statLine.index(after: close)...].split(separator: UInt8(ascii: " "), maxSplits: 5)
        guard fields.count >= 4, let state = fields[0].first,
            let parent = pid_t(String(decoding: fields[1], as: UTF8.self)),
            let group = pid_t(String(decoding: fields[2], as: UTF8.self)),
            let session = pid_t(String(decoding: fields[3], as: UTF8.self))
        else { return nil }
        self.state = state
        self.parent = parent
        self.group = group
        self.session = session
    }

    /// `pid`'s fields now, nil when it is gone (or `/proc` cannot be read).
    public static func read(_ pid: pid_t, procRoot: String = "/proc") -> ProcStat? {
        let fd = open("\(procRoot)/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return ProcStat(statLine: buffer[0..<count])
    }

    /// The most processes a walk visits.
    public static let defaultWalkLimit = 65_536

    /// Calls `body` with each process's pid and fields (those that vanish meanwhile are
    /// skipped) until it returns false or `limit` processes were visited.
    public static func forEachProcess(procRoot: String = "/proc", limit: Int = defaultWalkLimit, _ body: (pid_t, ProcStat) -> Bool) {
        guard let directory = opendir(procRoot) else { return }
        defer { closedir(directory) }
        var seen = 0
        while seen < limit, let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self) }
            guard let pid = pid_t(name), pid > 0 else { continue }
            seen += 1
            guard let stat = read(pid, procRoot: procRoot) else { continue }
            if !body(pid, stat) { return }
        }
    }
}
