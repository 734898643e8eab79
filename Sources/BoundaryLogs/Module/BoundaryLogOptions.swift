import AgentCore
import ArgumentParser
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The boundary log proxy's flags and their environment twins.
public struct BoundaryLogOptions: ParsableArguments {
    @Option(name: .long, help: "Unix socket the agent firewall (boundary) sends audit logs to; empty disables the proxy. Env CODER_AGENT_FIREWALL_LOG_PROXY_SOCKET_PATH. Default $TMPDIR/boundary-audit.sock.")
    public var agentFirewallLogProxySocketPath: String?

    /// The old name (hidden, as in the reference): the new flag, then this one, then the new
    /// variable, then the old one.
    @Option(name: .long, help: ArgumentHelp("Use --agent-firewall-log-proxy-socket-path instead.", visibility: .hidden))
    public var boundaryLogProxySocketPath: String?

    @Option(name: .long, help: "The socket's mode, octal (0660 lets a group share it). Env CODER_AGENT_BOUNDARY_LOG_PROXY_SOCKET_MODE. Default 0600.")
    public var boundaryLogProxySocketMode: String?

    @Option(name: .long, help: "Disk spool for batches that do not fit in memory (bytes, or with KiB, MiB, GiB); 0 disables it. Env CODER_AGENT_BOUNDARY_LOG_SPOOL_SIZE. Default 64MiB.")
    public var boundaryLogSpoolSize: String?

    public init() {}

    public struct Configuration: Sendable, Equatable {
        /// nil: the proxy does not run.
        public var socketPath: String?
        public var socketMode: UInt32 = 0o600
        public var spoolBytes = 64 << 20

        public init(socketPath: String?, socketMode: UInt32 = 0o600, spoolBytes: Int = 64 << 20) {
            self.socketPath = socketPath
            self.socketMode = socketMode
            self.spoolBytes = spoolBytes
        }

        /// `filepath.Join(os.TempDir(), "boundary-audit.sock")`, as boundary computes it.
        public static func defaultSocketPath(_ environment: [String: String]) -> String {
            let temporary = environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
            return (temporary.hasSuffix("/") ? String(temporary.dropLast()) : temporary) + "/boundary-audit.sock"
        }
    }

    public func resolve(_ settings: Settings) throws(ConfigurationError) -> Configuration {
        let path =
            settings.valueAllowingEmpty(
                agentFirewallLogProxySocketPath ?? boundaryLogProxySocketPath, flag: "--agent-firewall-log-proxy-socket-path",
                variable: "CODER_AGENT_FIREWALL_LOG_PROXY_SOCKET_PATH")
            ?? settings.valueAllowingEmpty(nil, flag: "", variable: "CODER_AGENT_BOUNDARY_LOG_PROXY_SOCKET_PATH")
        var configuration = Configuration(socketPath: path.map(\.text) ?? Configuration.defaultSocketPath(settings.environment))
        if configuration.socketPath?.isEmpty == true { configuration.socketPath = nil }
        if let mode = try settings.parsed(
            boundaryLogProxySocketMode, flag: "--boundary-log-proxy-socket-mode", variable: "CODER_AGENT_BOUNDARY_LOG_PROXY_SOCKET_MODE",
            { text -> UInt32 in
                guard let value = UInt32(text, radix: 8), value <= 0o777 else { throw Invalid("invalid mode \(goQuote(text)): expected octal such as 0600") }
                return value
            })
        {
            configuration.socketMode = mode
        }
        if let size = try settings.parsed(
            boundaryLogSpoolSize, flag: "--boundary-log-spool-size", variable: "CODER_AGENT_BOUNDARY_LOG_SPOOL_SIZE", Self.bytes)
        {
            configuration.spoolBytes = size
        }
        return configuration
    }

    struct Invalid: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// `1048576`, `512KiB`, `64MiB`, `1GiB`.
    static func bytes(_ text: String) throws -> Int {
        let units: [(String, Int)] = [("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("", 1)]
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            if let value = Int(text.dropLast(suffix.count)), value >= 0, value <= (1 << 40) / factor { return value * factor }
        }
        throw Invalid("invalid size \(goQuote(text)): expected bytes, or a number with KiB, MiB or GiB")
    }
}
