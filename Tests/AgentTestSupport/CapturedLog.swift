import Logging
import Synchronization

/// A log handler that keeps every line (level and message) for a test to read.
public final class CapturedLog: Sendable {
    public struct Line: Sendable {
        public var level: Logger.Level
        public var message: String
        public var metadata: [String: String]
    }

    private let lines = Mutex<[Line]>([])

    private let level: Logger.Level

    /// Keeps lines at `level` and above.
    public init(level: Logger.Level = .trace) {
        self.level = level
    }

    public var all: [Line] { lines.withLock { $0 } }

    public var logger: Logger {
        var logger = Logger(label: "test.captured") { [level] _ in Handler(sink: self, logLevel: level) }
        logger.logLevel = level
        return logger
    }

    /// Whether a line's message or metadata contains `text`.
    public func contains(_ text: String) -> Bool {
        all.contains { line in line.message.contains(text) || line.metadata.values.contains { $0.contains(text) } }
    }

    /// Every line as `level: message key=value ...`, one per line (for a failure's message).
    public var text: String {
        all.map { line in
            ([("\(line.level): \(line.message)")] + line.metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }).joined(separator: " ")
        }.joined(separator: "\n")
    }

    fileprivate func add(_ line: Line) {
        lines.withLock { $0.append(line) }
    }

    private struct Handler: LogHandler {
        let sink: CapturedLog
        var logLevel: Logger.Level
        var metadata: Logger.Metadata = [:]

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            var all = metadata
            for (key, value) in event.metadata ?? [:] { all[key] = value }
            sink.add(Line(level: event.level, message: "\(event.message)", metadata: all.mapValues { "\($0)" }))
        }
    }
}
