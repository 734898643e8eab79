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

    public init() {}

    public var all: [Line] { lines.withLock { $0 } }

    public var logger: Logger {
        var logger = Logger(label: "test.captured") { _ in Handler(sink: self) }
        logger.logLevel = .debug
        return logger
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
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .debug

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
