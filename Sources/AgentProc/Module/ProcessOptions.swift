import AgentCore
import ArgumentParser

/// The process API's flags and their environment twins.
public struct ProcessOptions: ParsableArguments {
    @Option(name: .long, help: "Default working directory for processes. Env CODER_AGENT_DIRECTORY. Default: $HOME.")
    public var directory: String?

    @Option(name: .long, help: "Lower children's priority (oom_score_adj, nice): true or false. Env CODER_PROC_PRIO_MGMT. Default true.")
    public var procPrioMgmt: String?

    public init() {}

    /// The resolved settings.
    public struct Configuration: Sendable, Equatable {
        /// Where processes run when neither the request nor the manifest names a directory.
        public var directory: String?
        /// Lower children's priority (the reference's switch keeps its name).
        public var priority = true

        public init(directory: String? = nil, priority: Bool = true) {
            self.directory = directory
            self.priority = priority
        }
    }

    public func resolve(_ settings: Settings) throws(ConfigurationError) -> Configuration {
        Configuration(
            directory: try settings.string(directory, flag: "--directory", variable: "CODER_AGENT_DIRECTORY"),
            priority: try settings.bool(procPrioMgmt, flag: "--proc-prio-mgmt", variable: "CODER_PROC_PRIO_MGMT") ?? true)
    }
}
