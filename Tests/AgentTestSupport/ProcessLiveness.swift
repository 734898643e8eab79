import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// One process, named by its pid and its start time (field 22 of `/proc/<pid>/stat`, clock
/// ticks after boot), so that a later check or signal concerns this process and never one,
/// or a thread, that got its pid after it ended: a busy host reuses pids within seconds
/// (`pid_max` is 32 768 on Debian, and the suite starts thousands of processes and threads).
public struct ProcessInstance: Sendable, Hashable, CustomStringConvertible {
    public let pid: pid_t
    public let startTime: UInt64

    /// The process that has `pid` now; nil when there is none.
    public init?(_ pid: pid_t) {
        guard let stat = processStat(pid), let startTime = stat.startTime else { return nil }
        self.pid = pid
        self.startTime = startTime
    }

    /// Whether this process has ended: gone from `/proc`, a zombie (an orphan waits for
    /// whoever adopted it to reap it), or its pid now another's.
    public var hasEnded: Bool {
        guard let stat = processStat(pid) else { return true }
        return stat.state == "Z" || stat.startTime != startTime
    }

    /// SIGKILL unless it has ended: a test's clean-up after a failed expectation.
    public func killIfRunning() {
        if !hasEnded { kill(pid, SIGKILL) }
    }

    public var description: String { "\(pid)" }
}

/// True while any process with this exact command line exists (reads /proc).
public func processExists(commandLine: String) -> Bool {
    guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return false }
    for entry in entries {
        guard let pid = pid_t(entry),
            let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline"), !data.isEmpty
        else { continue }
        let args = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }.joined(separator: " ")
        // Zombies keep a cmdline of "" so a match is a live process; check state anyway.
        if args == commandLine, processStat(pid)?.state != "Z" { return true }
    }
    return false
}

/// The state letter (field 3) and start time (field 22) of `/proc/<pid>/stat`.
private func processStat(_ pid: pid_t) -> (state: Character, startTime: UInt64?)? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = text.lastIndex(of: ")") else {
        return nil
    }
    // After the command's closing parenthesis: field 3 (the state) onwards.
    let fields = text[text.index(after: close)...].split(separator: " ")
    guard let state = fields.first?.first else { return nil }
    return (state, fields.count > 19 ? UInt64(fields[19]) : nil)
}
