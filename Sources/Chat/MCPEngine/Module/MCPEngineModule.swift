import AgentCore
import AgentHTTP
import Glibc
import Hummingbird

/// The MCP engine as a capability module, mounted at `/api/v0/mcp`: the server manager (a
/// service that stops with the work phase, closing every server) and its routes.
public struct MCPEngineModule: HTTPModule {
    public let manager: MCPServerManager

    public var name: String { "mcp" }

    /// `configFiles` are the `.mcp.json` list entries (`CODER_AGENT_EXP_MCP_CONFIG_FILES`);
    /// `directory` is `--directory`; `agentToken` is redacted from every error shown.
    public init(configFiles: [String], clientVersion: String, context: AgentContext, directory: String?, agentToken: String? = nil) {
        manager = MCPServerManager(
            configuration: .init(configFiles: configFiles, clientVersion: clientVersion), home: context.homeDirectory,
            directory: directory, environment: context.environment, agentToken: agentToken, manifest: context.manifest,
            sessionEnvironment: context.sessionEnvironment, gate: context.startPhase.map { .afterStartPhase($0) } ?? .open,
            catalog: context.mcpCatalog)
        // The agent socket's `exp chat context tools|restart` reach the engine through the catalog.
        context.mcpCatalog.attach(manager)
    }

    public var services: [ModuleService] {
        [ModuleService("mcp", manager, stopsIn: .work)]
    }

    public func terminateNow() { manager.terminateNow() }

    public func routes(_ routes: inout AgentRoutes) {
        MCPRoutes(manager: manager).add(to: &routes)
    }
}
