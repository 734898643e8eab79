import Hummingbird

/// A capability module's HTTP surface.
///
/// Each module (processes, git watching, desktop, ...) implements this and the executable
/// hands every provider to ``AgentHTTPServer``; modules never see each other's routes.
public protocol AgentRouteProvider: Sendable {
    /// Adds plain HTTP routes.
    func addRoutes(to router: Router<AgentRequestContext>)
    /// Adds WebSocket upgrade routes. A route that declines to upgrade falls through to the
    /// HTTP router, so it can answer 404 or 400 there.
    func addWebSocketRoutes(to router: Router<AgentRequestContext>)
}

extension AgentRouteProvider {
    public func addWebSocketRoutes(to router: Router<AgentRequestContext>) {}
}
