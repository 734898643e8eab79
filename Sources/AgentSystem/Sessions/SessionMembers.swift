#if canImport(Glibc)
import Glibc
#endif

/// The process groups of one session (every process whose session id is the leader's pid),
/// read from `/proc`: what a terminal's hangup reaches, including the jobs an interactive
/// shell puts in groups of their own, which signalling the shell's group alone misses.
///
/// Bounds: at most ``maxProcesses`` entries of `/proc` are read, 512 bytes of each `stat`.
public enum SessionMembers {
    public static let maxProcesses = 65_536

    /// The groups (their ids) with a member in session `session`.
    public static func groups(ofSession session: pid_t, procRoot: String = "/proc") -> Set<pid_t> {
        guard let directory = opendir(procRoot) else { return [] }
        defer { closedir(directory) }
        var groups: Set<pid_t> = []
        var seen = 0
        var buffer = [UInt8](repeating: 0, count: 512)
        while seen < maxProcesses, let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let pid = pid_t(name), pid > 0 else { continue }
            seen += 1
            let fd = open("\(procRoot)/\(pid)/stat", O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            close(fd)
            guard count > 0, let ids = ids(statLine: buffer[0..<count]), ids.session == session else { continue }
            groups.insert(ids.group)
        }
        return groups
    }

    /// `pid (comm) state ppid pgrp session ...` → (pgrp, session), read after the command
    /// name's last `)` (the name may hold spaces and parentheses).
    public static func ids(statLine: ArraySlice<UInt8>) -> (group: pid_t, session: pid_t)? {
        guard let close = statLine.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = statLine[(close + 1)...].split(separator: UInt8(ascii: " "), maxSplits: 5)
        guard fields.count >= 4, let group = pid_t(String(decoding: fields[2], as: UTF8.self)),
            let session = pid_t(String(decoding: fields[3], as: UTF8.self))
        else { return nil }
        return (group, session)
    }
}
