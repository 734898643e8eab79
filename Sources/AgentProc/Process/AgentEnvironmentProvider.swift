/// Supplies what the agent knows beyond its own environment.
///
/// Standalone, it is a ``StaticEnvironmentProvider`` built from flags; with a control plane,
/// the manifest fills it (directory, `CODER_*` variables, manifest variables).
public protocol AgentEnvironmentProvider: Sendable {
    /// Variables layered over the agent's own environment; a throw falls back to the raw
    /// environment with a warning, as the reference does.
    func agentEnvironment() async throws -> [String: String]
    /// The same variables with a generation that changes whenever they may have: a start
    /// without variables of its own reuses the environment built for the same generation
    /// and chat, with no merge and no comparison (a manifest's hundreds of variables cost
    /// tens of microseconds per start otherwise). By default the generation is unknown.
    func agentEnvironmentLayer() async throws -> AgentEnvironmentLayer
    /// The configured default working directory (the manifest's), if any.
    func defaultDirectory() async -> String?
}

/// Variables from an ``AgentEnvironmentProvider`` and their generation.
public struct AgentEnvironmentLayer: Sendable {
    /// Equal generations from one provider mean equal variables; nil: unknown.
    public var generation: UInt64?
    public var variables: [String: String]

    public init(generation: UInt64?, variables: [String: String]) {
        self.generation = generation
        self.variables = variables
    }
}

extension AgentEnvironmentProvider {
    public func agentEnvironmentLayer() async throws -> AgentEnvironmentLayer {
        AgentEnvironmentLayer(generation: nil, variables: try await agentEnvironment())
    }
}

/// A provider with fixed values.
public struct StaticEnvironmentProvider: AgentEnvironmentProvider {
    public var environment: [String: String]
    public var directory: String?

    public init(environment: [String: String] = [:], directory: String? = nil) {
        self.environment = environment
        self.directory = directory
    }

    public func agentEnvironment() async throws -> [String: String] { environment }
    /// One generation: the provider is a value, so its variables never change.
    public func agentEnvironmentLayer() async throws -> AgentEnvironmentLayer {
        AgentEnvironmentLayer(generation: 0, variables: environment)
    }
    public func defaultDirectory() async -> String? { directory }
}
