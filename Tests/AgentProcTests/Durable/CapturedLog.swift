import Logging
import Synchronization

/// A log handler that keeps every line (level and message) for a test to read.
final class CapturedLog: Sendable {
    struct Line: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: [String: String]
    }

    private let lines = Mutex<[Line]>([])

    var all: [Line] { lines.withLock { $0 } }

    var logger: Logger {
        var logger = Logger(label: "test.captured") { _ in Handler(sink: self) }
        logger.logLevel = .debug
        return logger
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
