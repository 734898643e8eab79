import AgentCore
import ArgumentParser
import Logging

extension AgentLogging {
    /// The resolved logging settings.
    public struct Configuration: Sendable, Equatable {
        public var level: Logger.Level = .info
        public var format: LogFormat = .text
        /// The log file's level: debug as the reference, or `--log-level` when given.
        public var fileLevel: Logger.Level = .debug

        public init(level: Logger.Level = .info, format: LogFormat = .text, fileLevel: Logger.Level = .debug) {
            self.level = level
            self.format = format
            self.fileLevel = fileLevel
        }
    }
}

/// Logging's flags and their environment twins.
public struct LoggingOptions: ParsableArguments {
    @Option(name: .long, help: "trace, debug, info, notice, warning, error or critical. Env CODER_AGENT_LOG_LEVEL. Default info.")
    public var logLevel: String?

    @Option(name: .long, help: "text or json. Env CODER_AGENT_LOG_FORMAT. Default text.")
    public var logFormat: String?

    public init() {}

    public func resolve(_ settings: Settings) throws(ConfigurationError) -> AgentLogging.Configuration {
        var configuration = AgentLogging.Configuration()
        if let value = settings.value(logLevel, flag: "--log-level", variable: "CODER_AGENT_LOG_LEVEL") {
            guard let level = AgentLogging.parseLevel(value.text) else {
                throw ConfigurationError(
                    "\(value.source): invalid log level \"\(value.text)\" (expected trace, debug, info, notice, warning, error or critical)")
            }
            configuration.level = level
            configuration.fileLevel = level
        }
        if let value = settings.value(logFormat, flag: "--log-format", variable: "CODER_AGENT_LOG_FORMAT") {
            guard let format = LogFormat(rawValue: value.text.lowercased()) else {
                throw ConfigurationError("\(value.source): invalid log format \"\(value.text)\" (expected text or json)")
            }
            configuration.format = format
        }
        return configuration
    }
}
