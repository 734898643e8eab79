import AgentCore
import ArgumentParser

/// The process API's flags and their environment twins.
public struct ProcessOptions: ParsableArguments {
    @Option(name: .long, help: "Default working directory for processes. Env CODER_AGENT_DIRECTORY. Default: $HOME.")
    public var directory: String?

    @Option(name: .long, help: "Lower children's priority (oom_score_adj, nice): true or false. Env CODER_PROC_PRIO_MGMT. Default true.")
    public var procPrioMgmt: String?

    @Option(name: .long, help: "Most bytes of one process's output kept on disk (oldest dropped first). Env CODER_AGENT_PROC_SPOOL_MAX_BYTES. Default 8 MiB.")
    public var procSpoolMaxBytes: String?

    @Option(name: .long, help: "Most bytes of all processes' output kept on disk (oldest dropped first). Env CODER_AGENT_PROC_SPOOL_TOTAL_BYTES. Default 256 MiB.")
    public var procSpoolTotalBytes: String?

    @Option(name: .long, help: "Spool processes' output to disk under the state dir (offset reads, output across restarts): true or false. Env CODER_AGENT_PROC_SPOOL. Default true.")
    public var procSpool: String?

    public init() {}

    /// The resolved settings.
    public struct Configuration: Sendable, Equatable {
        /// Where processes run when neither the request nor the manifest names a directory.
        public var directory: String?
        /// Lower children's priority (the reference's switch keeps its name).
        public var priority = true
        /// Spool processes' output to disk.
        public var spool = true
        /// Bounds of the processes' output on disk.
        public var spoolLimits = OutputSpoolStore.Limits()

        public init(directory: String? = nil, priority: Bool = true, spool: Bool = true, spoolLimits: OutputSpoolStore.Limits = .init()) {
            self.directory = directory
            self.priority = priority
            self.spool = spool
            self.spoolLimits = spoolLimits
        }
    }

    public func resolve(_ settings: Settings) throws(ConfigurationError) -> Configuration {
        var limits = OutputSpoolStore.Limits()
        let segment = limits.segmentBytes
        /// A byte count of at least one segment.
        func bytes(_ text: String) throws -> Int {
            guard let value = Int(text), value >= segment else {
                throw ConfigurationError("want a byte count of at least \(segment) (one segment), got \(goQuote(text))")
            }
            return value
        }
        if let value = try settings.parsed(procSpoolMaxBytes, flag: "--proc-spool-max-bytes", variable: "CODER_AGENT_PROC_SPOOL_MAX_BYTES", bytes) {
            limits.maxBytesPerSpool = value
        }
        if let value = try settings.parsed(procSpoolTotalBytes, flag: "--proc-spool-total-bytes", variable: "CODER_AGENT_PROC_SPOOL_TOTAL_BYTES", bytes) {
            limits.maxTotalBytes = value
        }
        return Configuration(
            directory: try settings.string(directory, flag: "--directory", variable: "CODER_AGENT_DIRECTORY"),
            priority: try settings.bool(procPrioMgmt, flag: "--proc-prio-mgmt", variable: "CODER_PROC_PRIO_MGMT") ?? true,
            spool: try settings.bool(procSpool, flag: "--proc-spool", variable: "CODER_AGENT_PROC_SPOOL") ?? true,
            spoolLimits: limits)
    }
}
