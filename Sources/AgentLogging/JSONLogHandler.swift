import AgentCore
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Logging
import Synchronization

/// A swift-log handler that writes one JSON object per line to stderr.
///
/// Keys: `ts` (RFC 3339, UTC, milliseconds), `level`, `logger`, `msg`, then metadata.
/// Lines are written with a single `write(2)`, so concurrent records never interleave.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let fd: Int32

    public init(label: String, level: Logger.Level, fd: Int32 = 2) {
        self.label = label
        self.logLevel = level
        self.fd = fd
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        var line = "{"
        line += "\"ts\":" + JSONLogHandler.quote(JSONLogHandler.timestamp())
        line += ",\"level\":" + JSONLogHandler.quote(event.level.rawValue)
        line += ",\"logger\":" + JSONLogHandler.quote(label)
        line += ",\"msg\":" + JSONLogHandler.quote(event.message.description)
        for key in merged.keys.sorted() {
            line += "," + JSONLogHandler.quote(key) + ":" + JSONLogHandler.quote(merged[key]!.description)
        }
        line += "}\n"
        var bytes = Array(line.utf8)
        bytes.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n <= 0 { if errno == EINTR { continue }; return }
                offset += n
            }
        }
    }

    /// A JSON string literal.
    public static func quote(_ text: String) -> String { jsonQuote(text) }

    static func timestamp() -> String {
        Date().formatted(.iso8601.year().month().day().dateSeparator(.dash).time(includingFractionalSeconds: true).timeSeparator(.colon).timeZone(separator: .omitted))
    }
}
