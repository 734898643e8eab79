import AgentCore
import ArgumentParser

/// The HTTP API's flags and their environment twins.
public struct HTTPOptions: ParsableArguments {
    @Option(name: .long, help: "HTTP API listen address: host:port, [v6]:port or unix:/path. Env CODER_AGENT_HTTP_ADDRESS. Default \(BindTarget.defaultAddress).")
    public var httpAddress: String?

    @Option(name: .long, help: "Log each HTTP API request at info (method, path without query, status, duration, bytes; no headers): true or false. Env CODER_AGENT_HTTP_ACCESS_LOG. Default true.")
    public var accessLog: String?

    public init() {}

    /// The resolved settings.
    public struct Configuration: Sendable, Equatable {
        public var address: BindTarget
        /// One line per request at info (``AccessLog``).
        public var accessLog: Bool

        public init(address: BindTarget, accessLog: Bool = true) {
            self.address = address
            self.accessLog = accessLog
        }
    }

    /// The one wording of the warning a listener bound beyond loopback logs, the HTTP API's
    /// and the SSH server's alike (with the address as `address` metadata).
    public static func beyondLoopbackWarning(_ listener: String) -> String {
        "\(listener) listens beyond loopback"
    }

    public func resolve(_ settings: Settings) throws(ConfigurationError) -> Configuration {
        let address = try settings.parsed(httpAddress, flag: "--http-address", variable: "CODER_AGENT_HTTP_ADDRESS") {
            try BindTarget(parsing: $0)
        }
        let accessLog = try settings.bool(accessLog, flag: "--access-log", variable: "CODER_AGENT_HTTP_ACCESS_LOG") ?? true
        return Configuration(address: address ?? (try! BindTarget(parsing: BindTarget.defaultAddress)), accessLog: accessLog)
    }
}
