import Logging

/// Log output formats selectable with `--log-format`.
public enum LogFormat: String, Sendable, CaseIterable {
    case text
    case json
}

/// Sets up swift-log once per process.
public enum AgentLogging {
    /// Installs the handler for `format` at `level`, writing to stderr.
    public static func bootstrap(level: Logger.Level, format: LogFormat) {
        LoggingSystem.bootstrap { label in
            switch format {
            case .json:
                return JSONLogHandler(label: label, level: level) as any LogHandler
            case .text:
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler as any LogHandler
            }
        }
    }

    /// Parses a `--log-level` value (`trace` ... `critical`, plus `warn` and `err` aliases).
    public static func parseLevel(_ text: String) -> Logger.Level? {
        switch text.lowercased() {
        case "warn": return .warning
        case "err": return .error
        default: return Logger.Level(rawValue: text.lowercased())
        }
    }
}
