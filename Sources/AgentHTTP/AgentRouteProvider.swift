import Hummingbird

/// A capability module's HTTP surface.
///
/// Each module (processes, git watching, desktop, ...) implements this and the executable
/// hands every provider to ``AgentHTTPServer``; modules never see each other's routes.
public protocol AgentRouteProvider: Sendable {
    /// Adds plain HTTP routes.
    func addRoutes(to router: Router<AgentRequestContext>)
    /// WebSocket routes (full paths); the server also answers plain requests to them.
    func webSocketRoutes() -> [AgentWebSocketRoute]
}

extension AgentRouteProvider {
    public func webSocketRoutes() -> [AgentWebSocketRoute] { [] }
}
