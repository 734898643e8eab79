import AgentCore

/// The ``AgentEnvironmentProvider`` of a running agent: the latest manifest's variables and
/// directory (through AgentCore's ``ManifestStore``), and until one arrives no variables and
/// the configured fallback directory.
public struct ManifestEnvironmentProvider: AgentEnvironmentProvider {
    public let store: ManifestStore
    /// `--directory`, used until a manifest names a directory.
    public let fallbackDirectory: String?

    public init(store: ManifestStore, fallbackDirectory: String?) {
        self.store = store
        self.fallbackDirectory = fallbackDirectory
    }

    public func agentEnvironment() async throws -> [String: String] { store.current?.environment ?? [:] }

    public func defaultDirectory() async -> String? {
        if let directory = store.current?.directory, !directory.isEmpty { return directory }
        return fallbackDirectory
    }
}
