#if canImport(Glibc)
import Glibc
#endif

/// Whether a process group still has live members besides its leader, read from `/proc`:
/// what a stdio server's thread asks after the server (the group's leader) exited, to know
/// whether the descendants it left in its group need signalling and when they are gone.
///
/// Zombies do not count (they are dead; their parent reaps them). Cost: one pass over
/// `/proc`, reading each process's `stat` into a 512-byte buffer; no memory kept.
enum ProcessGroupScan {
    /// Whether any process other than `leader` is alive in process group `group`.
    static func hasOtherMembers(group: pid_t, leader: pid_t) -> Bool {
        guard let directory = opendir("/proc") else { return false }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            let pid = withUnsafeBytes(of: entry.pointee.d_name) { raw -> pid_t? in
                var value: pid_t = 0
                for byte in raw {
                    if byte == 0 { break }
                    guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), value < 100_000_000 else { return nil }
                    value = value * 10 + pid_t(byte - UInt8(ascii: "0"))
                }
                return value > 0 ? value : nil
            }
            guard let pid, pid != leader else { continue }
            if let (state, pgrp) = stateAndGroup(pid), pgrp == group, state != UInt8(ascii: "Z"), state != UInt8(ascii: "X") {
                return true
            }
        }
        return false
    }

    /// The state letter and process group of `pid` from `/proc/<pid>/stat`
    /// (`pid (comm) state ppid pgrp …`; the name may hold spaces and parentheses, so the
    /// fields are counted from the last `)`).
    static func stateAndGroup(_ pid: pid_t) -> (UInt8, pid_t)? {
        let fd = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 512)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0, let close = buffer[..<n].lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = buffer[(close + 1)..<n].split(separator: UInt8(ascii: " "), maxSplits: 4)
        guard fields.count >= 3, let state = fields[0].first, let group = pid_t(String(decoding: fields[2], as: UTF8.self)) else { return nil }
        return (state, group)
    }
}
