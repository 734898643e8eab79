import AgentCore
import Synchronization

/// The ``AgentEnvironmentProvider`` of a running agent: every command's layers over the
/// agent's environment for the latest manifest, and its directory (else the fallback).
// Memory: the environment of one manifest publication, built once and reused until the next.
public final class ManifestEnvironmentProvider: AgentEnvironmentProvider {
    public let source: any ManifestSource
    /// `--directory`, used until a manifest names a directory.
    public let fallbackDirectory: String?
    /// The agent's own environment, the base the manifest's layers go over.
    public let base: [String: String]
    public let command: CommandEnvironment
    private let built = Mutex<(number: UInt64, variables: [String: String])?>(nil)

    public init(
        source: any ManifestSource, fallbackDirectory: String?, base: [String: String] = [:],
        command: CommandEnvironment = CommandEnvironment()
    ) {
        self.source = source
        self.fallbackDirectory = fallbackDirectory
        self.base = base
        self.command = command
    }

    public func agentEnvironment() async throws -> [String: String] { try await agentEnvironmentLayer().variables }

    /// The manifest's publication number is the generation (0 before the first).
    public func agentEnvironmentLayer() async throws -> AgentEnvironmentLayer {
        guard let publication = source.currentPublication else { return AgentEnvironmentLayer(generation: 0, variables: [:]) }
        if let cached = built.withLock({ $0 }), cached.number == publication.number {
            return AgentEnvironmentLayer(generation: cached.number, variables: cached.variables)
        }
        let variables = command.apply(to: base, manifest: publication.manifest)
        built.withLock { $0 = (publication.number, variables) }
        return AgentEnvironmentLayer(generation: publication.number, variables: variables)
    }

    public func defaultDirectory() async -> String? {
        if let directory = source.currentManifest?.directory, !directory.isEmpty { return directory }
        return fallbackDirectory
    }
}
