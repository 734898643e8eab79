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
