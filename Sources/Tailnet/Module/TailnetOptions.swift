import AgentCore
import ArgumentParser

/// The tailnet's flag and its environment twin. On by default whenever a control plane is
/// configured (coderd reaches the HTTP API only through it); never in standalone mode.
public struct TailnetOptions: ParsableArguments {
    @Option(name: .long, help: "Join the control plane's tailnet (DERP + WireGuard) so coderd reaches the HTTP API on port 4 and forwarded ports; false turns it off. Env CODER_AGENT_TAILNET. Default true when a control plane is configured.")
    public var tailnet: String?

    @Option(name: .long, help: "The UDP port of the tailnet's direct paths (STUN, disco and WireGuard, IPv4 and IPv6); 0 picks a random port per family. Env CODER_AGENT_TAILNET_LISTEN_PORT. Default 0.")
    public var tailnetListenPort: String?

    public init() {}

    public struct Configuration: Sendable, Equatable {
        public var enabled: Bool
        /// The UDP port (0: random).
        public var listenPort: UInt16

        public init(enabled: Bool = true, listenPort: UInt16 = 0) {
            self.enabled = enabled
            self.listenPort = listenPort
        }
    }

    public func resolve(_ settings: Settings) throws(ConfigurationError) -> Configuration {
        let port = try settings.parsed(
            tailnetListenPort, flag: "--tailnet-listen-port", variable: "CODER_AGENT_TAILNET_LISTEN_PORT"
        ) { text -> UInt16 in
            guard let port = UInt16(text) else { throw ConfigurationError("invalid port \(goQuote(text)) (expected 0 to 65535)") }
            return port
        }
        return Configuration(
            enabled: try settings.bool(tailnet, flag: "--tailnet", variable: "CODER_AGENT_TAILNET") ?? true, listenPort: port ?? 0)
    }
}
