import AgentCore
import Logging

/// The agent socket as a capability module: the unit graph for `exp sync` and app status
/// upward, and the chat context's calls (when given its ``ContextControl``), served on a unix
/// socket. Its server stops in the `work` phase (the socket the
/// agent made is removed before the final reports go up).
public struct AgentSocketModule: AgentModule {
    public let units: UnitManager
    public let server: AgentSocketServer?

    public var name: String { "agent socket" }

    public init(
        configuration: AgentSocketOptions.Configuration, context: AgentContext, chatContext: (any ContextControl)? = nil,
        logger: Logger = Logger(label: "workspace-agent.socket")
    ) {
        units = UnitManager()
        if configuration.enabled {
            var service = AgentSocketService(units: units, upward: context.upward, context: chatContext)
            service.mcpCatalog = context.mcpCatalog
            service.coderREST = context.coderREST
            server = AgentSocketServer(configuration: .init(path: configuration.path), service: service, logger: logger)
        } else {
            logger.info("socket server is disabled")
            server = nil
        }
    }

    public var services: [ModuleService] {
        server.map { [ModuleService("agent socket", $0, stopsIn: .work)] } ?? []
    }
}
