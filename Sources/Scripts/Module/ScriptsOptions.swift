import AgentCore
import ArgumentParser

/// The scripts' flags and their environment twins (the reference's names where it has them).
public struct ScriptsOptions: ParsableArguments {
    @Option(name: .long, help: "Where scripts keep data: <dir>/coder-script-data/<log source id> and the bin dir on PATH. Env CODER_AGENT_SCRIPT_DATA_DIR. Default $TMPDIR or /tmp.")
    public var scriptDataDir: String?

    @Option(name: .long, help: "Where a script's log file goes when its log_path is relative or empty. Env CODER_AGENT_LOG_DIR. Default $TMPDIR or /tmp.")
    public var logDir: String?

    @Option(name: .long, help: "The longest a run_on_stop script may run at shutdown when its own timeout is unset or longer (Go duration); the agent's shutdown bound grows by it. Env CODER_AGENT_STOP_SCRIPTS_LIMIT. Default 5m.")
    public var stopScriptsLimit: String?

    public init() {}

    /// The resolved settings.
    public struct Configuration: Sendable, Equatable {
        public var scriptDataDirectory: String
        public var logDirectory: String
        public var stopScriptsLimit: Duration

        public init(scriptDataDirectory: String, logDirectory: String, stopScriptsLimit: Duration = .seconds(300)) {
            self.scriptDataDirectory = scriptDataDirectory
            self.logDirectory = logDirectory
            self.stopScriptsLimit = stopScriptsLimit
        }
    }

    public func resolve(_ settings: Settings) throws(ConfigurationError) -> Configuration {
        let temporary = Self.temporaryDirectory(settings.environment)
        let limit = try settings.parsed(
            stopScriptsLimit, flag: "--stop-scripts-limit", variable: "CODER_AGENT_STOP_SCRIPTS_LIMIT", { try GoDuration.parse($0) })
        if let limit, limit <= .zero {
            throw ConfigurationError("--stop-scripts-limit: must be positive")
        }
        return Configuration(
            scriptDataDirectory: try settings.string(scriptDataDir, flag: "--script-data-dir", variable: "CODER_AGENT_SCRIPT_DATA_DIR") ?? temporary,
            logDirectory: try settings.string(logDir, flag: "--log-dir", variable: "CODER_AGENT_LOG_DIR") ?? temporary,
            stopScriptsLimit: limit ?? .seconds(300))
    }

    /// Go's `os.TempDir()`: `$TMPDIR`, else `/tmp`.
    public static func temporaryDirectory(_ environment: [String: String]) -> String {
        if let dir = environment["TMPDIR"], !dir.isEmpty { return dir }
        return "/tmp"
    }
}
