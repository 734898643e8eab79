import AgentCore
import AgentHTTP
import Glibc
import Hummingbird
import Logging

/// The chat context as a capability module, mounted at `/api/v0`: the context manager (a
/// service that stops with the work phase) and its routes, `/context/...` (the sources API
/// and resync) and the legacy `/context-config`.
public struct ChatContextModule: HTTPModule {
    public let manager: ContextManager
    let agentToken: String?
    let environment: [String: String]
    /// Its session token (an instance-identity exchange's) is redacted too.
    let manifest: any ManifestSource

    public var name: String { "chat context" }

    /// `directory` is `--directory` (the working directory until a manifest names one).
    /// `agentToken` is redacted from every diagnostic pushed upward.
    public init(
        configuration: ChatContextOptions.Configuration, context: AgentContext, directory: String?,
        agentToken: String? = nil, maxWatches: Int = ContextWatcher.defaultMaxWatches
    ) {
        self.agentToken = agentToken
        self.environment = context.environment
        self.manifest = context.manifest
        let home = ContextSourcePath.clean(context.homeDirectory)
        manager = ContextManager(
            configuration: configuration, home: home, directory: directory, manifest: context.manifest,
            gate: context.startPhase.map { .afterStartPhase($0) } ?? .open, mcpCatalog: context.mcpCatalog,
            maxWatches: maxWatches)
    }

    public var services: [ModuleService] {
        [ModuleService("chat context", manager, stopsIn: .work)]
    }

    public var upwardParticipants: [any UpwardParticipant] {
        [
            ContextPushParticipant(
                manager: manager, redactor: redactor, metrics: manager.metrics,
                logger: Logger(label: "workspace-agent.context"))
        ]
    }

    /// The agent token and the secrets of the configured `.mcp.json` files' entries (each
    /// read up to ``MCPConfigFile/maxFileBytes``), read for each push.
    @Sendable func redactor() -> ContextRedactor {
        let files = ChatContextOptions.Configuration.resolve(
            manager.configuration.mcpConfigFiles, home: manager.home, workingDirectory: manager.workingDirectory)
        let fileSystem = PosixContextFileSystem()
        let environment = self.environment
        let servers = files.flatMap { path -> [MCPServerConfig] in
            guard let bytes = try? fileSystem.read(path, limit: MCPConfigFile.maxFileBytes),
                let file = try? MCPConfigFile.parse(bytes, environment: { environment[$0] })
            else { return [] }
            return file.servers
        }
        let tokens = Set([agentToken, manifest.currentManifest?.commandSecrets.sessionToken].compactMap { $0 })
        return ContextRedactor(secrets: Array(tokens)).adding(servers: servers)
    }

    public func routes(_ routes: inout AgentRoutes) {
        ContextRoutes(manager: manager).add(to: &routes)
    }
}
