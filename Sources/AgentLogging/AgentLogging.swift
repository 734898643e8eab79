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
            let base: any LogHandler
            switch format {
            case .json:
                base = JSONLogHandler(label: label, level: level)
            case .text:
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                base = handler
            }
            return ForwardingLogHandler(base: base, label: label)
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
