import AgentCore
import ArgumentParser

/// The agent socket's flags and their environment twins.
public struct AgentSocketOptions: ParsableArguments {
    @Option(name: .long, help: "Serve the agent socket: true or false. Env CODER_AGENT_SOCKET_SERVER_ENABLED. Default true.")
    public var socketServerEnabled: String?

    @Option(name: .long, help: "Agent socket path. Env CODER_AGENT_SOCKET_PATH. Default \(AgentSocketOptions.defaultPath).")
    public var socketPath: String?

    /// The reference's Unix default (no per-user variant).
    public static let defaultPath = "/tmp/coder-agent.sock"

    public init() {}

    /// The resolved settings.
    public struct Configuration: Sendable, Equatable {
        public var enabled = true
        public var path = AgentSocketOptions.defaultPath

        public init(enabled: Bool = true, path: String = AgentSocketOptions.defaultPath) {
            self.enabled = enabled
            self.path = path
        }
    }

    public func resolve(_ settings: Settings) throws(ConfigurationError) -> Configuration {
        Configuration(
            enabled: try settings.bool(socketServerEnabled, flag: "--socket-server-enabled", variable: "CODER_AGENT_SOCKET_SERVER_ENABLED") ?? true,
            path: Self.path(try settings.string(socketPath, flag: "--socket-path", variable: "CODER_AGENT_SOCKET_PATH")))
    }

    /// An empty path means the default, as in the reference.
    public static func path(_ chosen: String?) -> String {
        guard let chosen, !chosen.isEmpty else { return defaultPath }
        return chosen
    }
}
