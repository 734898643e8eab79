import AgentCore

/// The ``AgentEnvironmentProvider`` of a running agent: the latest manifest's variables and
/// directory (through AgentCore's ``ManifestSource``), and until one arrives no variables
/// and the configured fallback directory.
public struct ManifestEnvironmentProvider: AgentEnvironmentProvider {
    public let source: any ManifestSource
    /// `--directory`, used until a manifest names a directory.
    public let fallbackDirectory: String?

    public init(source: any ManifestSource, fallbackDirectory: String?) {
        self.source = source
        self.fallbackDirectory = fallbackDirectory
    }

    public func agentEnvironment() async throws -> [String: String] { source.currentManifest?.environment ?? [:] }

    /// The manifest's publication number is the generation (0 before the first).
    public func agentEnvironmentLayer() async throws -> AgentEnvironmentLayer {
        guard let publication = source.currentPublication else { return AgentEnvironmentLayer(generation: 0, variables: [:]) }
        return AgentEnvironmentLayer(generation: publication.number, variables: publication.manifest.environment)
    }

    public func defaultDirectory() async -> String? {
        if let directory = source.currentManifest?.directory, !directory.isEmpty { return directory }
        return fallbackDirectory
    }
}
