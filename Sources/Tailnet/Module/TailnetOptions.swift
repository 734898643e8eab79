import AgentCore
import ArgumentParser

/// The tailnet's flag and its environment twin. On by default whenever a control plane is
/// configured (coderd reaches the HTTP API only through it); never in standalone mode.
public struct TailnetOptions: ParsableArguments {
    @Option(name: .long, help: "Join the control plane's tailnet (DERP + WireGuard) so coderd reaches the HTTP API on port 4 and forwarded ports; false turns it off. Env CODER_AGENT_TAILNET. Default true when a control plane is configured.")
    public var tailnet: String?

    public init() {}

    public struct Configuration: Sendable, Equatable {
        public var enabled: Bool

        public init(enabled: Bool = true) {
            self.enabled = enabled
        }
    }

    public func resolve(_ settings: Settings) throws(ConfigurationError) -> Configuration {
        Configuration(enabled: try settings.bool(tailnet, flag: "--tailnet", variable: "CODER_AGENT_TAILNET") ?? true)
    }
}
