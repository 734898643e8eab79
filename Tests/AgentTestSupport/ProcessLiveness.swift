import Foundation

/// Whether process `pid` has ended: gone from `/proc`, or a zombie (an orphan waits for
/// whoever adopted it to reap it, which may be this test process).
public func processHasEnded(_ pid: Int32) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return true }
    return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
}
