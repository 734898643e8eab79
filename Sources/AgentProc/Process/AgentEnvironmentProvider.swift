/// Supplies what the agent knows beyond its own environment (spec process-api §4, step 2).
///
/// Standalone, it is a ``StaticEnvironmentProvider`` built from flags; with a control plane,
/// the manifest fills it (directory, `CODER_*` variables, manifest variables).
public protocol AgentEnvironmentProvider: Sendable {
    /// Variables layered over the agent's own environment; a throw falls back to the raw
    /// environment with a warning, as the reference does.
    func agentEnvironment() async throws -> [String: String]
    /// The configured default working directory (the manifest's), if any.
    func defaultDirectory() async -> String?
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
    public func defaultDirectory() async -> String? { directory }
}
