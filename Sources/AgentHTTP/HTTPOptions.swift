import AgentCore
import ArgumentParser

/// The HTTP API's flags and their environment twins.
public struct HTTPOptions: ParsableArguments {
    @Option(name: .long, help: "HTTP API listen address: host:port, [v6]:port or unix:/path. Env CODER_AGENT_HTTP_ADDRESS. Default \(BindTarget.defaultAddress).")
    public var httpAddress: String?

    public init() {}

    /// The resolved settings.
    public struct Configuration: Sendable, Equatable {
        public var address: BindTarget

        public init(address: BindTarget) {
            self.address = address
        }
    }

    public func resolve(_ settings: Settings) throws(ConfigurationError) -> Configuration {
        let address = try settings.parsed(httpAddress, flag: "--http-address", variable: "CODER_AGENT_HTTP_ADDRESS") {
            try BindTarget(parsing: $0)
        }
        return Configuration(address: address ?? (try! BindTarget(parsing: BindTarget.defaultAddress)))
    }
}
