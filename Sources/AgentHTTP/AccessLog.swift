import HTTPTypes
import Logging
import NIOCore

/// One access-log line per request at info: method, path (never its query, which can
/// carry paths or secrets, and no header), status, duration and response body bytes.
/// `--access-log=false` turns it off (``HTTPOptions``).
struct AccessLog: Sendable {
    /// The request being answered, from its head to its response's end.
    struct Entry {
        let method: String
        let path: Substring
        let start: UInt64
        var status = 0
        var bytes = 0

        init(method: String, uri: String) {
            self.method = method
            path = uri.prefix { $0 != "?" }
            start = NIODeadline.now().uptimeNanoseconds
        }
    }

    let logger: Logger
    /// Whether lines are written at all (the flag, and a logger that keeps info).
    let isOn: Bool

    init(logger: Logger, enabled: Bool) {
        self.logger = logger
        isOn = enabled && logger.logLevel <= .info
    }

    /// Writes `entry`'s line; `outcome` is set when the response did not end normally.
    func record(_ entry: Entry, listener: String, outcome: String? = nil) {
        guard isOn else { return }
        let nanoseconds = NIODeadline.now().uptimeNanoseconds &- entry.start
        var metadata: Logger.Metadata = [
            "method": .string(entry.method),
            "path": .string(String(entry.path)),
            "status": .stringConvertible(entry.status),
            "duration_ms": .string(Self.milliseconds(nanoseconds)),
            "bytes": .stringConvertible(entry.bytes),
            "listener": .string(listener),
        ]
        if let outcome { metadata["outcome"] = .string(outcome) }
        logger.info("request", metadata: metadata)
    }

    /// `12.345`: milliseconds with three decimals.
    static func milliseconds(_ nanoseconds: UInt64) -> String {
        let micros = nanoseconds / 1000
        let fraction = String(micros % 1000)
        return "\(micros / 1000).\(String(repeating: "0", count: 3 - fraction.count))\(fraction)"
    }
}
