import AgentCore
import Logging

/// Log output formats selectable with `--log-format`.
public enum LogFormat: String, Sendable, CaseIterable {
    case text
    case json
}

/// The agent's logging: a level and format, and the forwarder that carries warnings and
/// errors upward. ``bootstrap(_:)`` installs it once per process.
public struct AgentLogging: Sendable {
    public let level: Logger.Level
    public let format: LogFormat
    /// Where warnings and errors of forwarding loggers go (connected to the upward seam
    /// once the control-plane session exists).
    public let forwarder: LogForwarder
    /// The newest log lines, for `GET /debug/logs`.
    public let recent: RecentLogs
    /// `coder-agent.log`, written in the text of ``recent`` at ``fileLevel``; nil: none.
    public let file: RotatingLogFile?
    public let fileLevel: Logger.Level

    /// Installs the handler for `configuration` (stderr, and `file` when given); every logger
    /// made by `Logger(label:)` from now on also forwards its warnings and errors.
    public static func bootstrap(_ configuration: Configuration, file: RotatingLogFile? = nil) -> AgentLogging {
        let logging = AgentLogging(
            level: configuration.level, format: configuration.format, forwarder: LogForwarder(), recent: RecentLogs(),
            file: file, fileLevel: configuration.fileLevel)
        LoggingSystem.bootstrap { label in logging.handler(label: label, forwardsUpward: true) }
        return logging
    }

    /// A logger whose records never go upward: for the upward session itself, whose own
    /// failures would otherwise feed the queue they are about.
    public func localLogger(label: String) -> Logger {
        Logger(label: label) { label in handler(label: label, forwardsUpward: false) }
    }

    func handler(label: String, forwardsUpward: Bool) -> any LogHandler {
        let base: any LogHandler
        switch format {
        case .json:
            base = JSONLogHandler(label: label, level: level)
        case .text:
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            base = handler
        }
        return AgentLogHandler(
            base: base, recent: recent, forwarder: forwardsUpward ? forwarder : nil, label: label, file: file, fileLevel: fileLevel,
            escapesText: format == .text)
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
