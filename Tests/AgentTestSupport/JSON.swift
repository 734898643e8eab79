import Foundation

/// Parses a response body as a JSON object for assertions.
public func jsonObject(_ bytes: [UInt8]) -> [String: Any]? {
    (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any]
}

/// Reads a JSON number as Int (JSONSerialization gives NSNumber).
public func jsonInt(_ value: Any?) -> Int? {
    (value as? NSNumber)?.intValue
}

/// Polls `condition` every 20 ms until it holds or `timeout` passes; returns the final value.
/// The default is generous: a passing check returns at once, and a 2-core machine running
/// the whole suite was seen to take over 10 s for what takes milliseconds alone. Time in
/// which the poll itself could not run does not count (``PollDeadline``).
public func eventually(timeout: Duration = .seconds(30), _ condition: () async throws -> Bool) async rethrows -> Bool {
    var deadline = PollDeadline(timeout)
    while !deadline.hasPassed {
        if try await condition() { return true }
        await deadline.sleep(.milliseconds(20))
    }
    return try await condition()
}

/// The state letter of `/proc/<pid>/stat` (R, S, Z, ...), or nil when it cannot be read.
private func processState(_ pid: String) -> Character? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return nil }
    return stat[stat.index(close, offsetBy: 2)]
}

/// True while any process with this exact command line exists (reads /proc).
public func processExists(commandLine: String) -> Bool {
    guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return false }
    for entry in entries where entry.allSatisfy(\.isNumber) {
        guard let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline"), !data.isEmpty else { continue }
        let args = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }.joined(separator: " ")
        if args == commandLine {
            // Zombies keep a cmdline of "" so a match is a live process; check state anyway.
            if processState(entry) == "Z" { continue }
            return true
        }
    }
    return false
}
