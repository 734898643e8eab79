import HTTPTypes

/// The WebSocket routes as the connection core asks for them by path, answered by the one
/// ``RouteTable`` (GET routes with an upgrade).
struct WebSocketRouteTable: Sendable {
    let table: RouteTable

    init(table: RouteTable) { self.table = table }

    /// The request-duration timers of the route `path` matches, if any.
    func timers(_ path: Substring) -> RequestTimers? {
        table.endpoint(path)?.timers
    }

    /// The WebSocket route for `path` (query excluded) and its parameters.
    func match(_ path: Substring) -> (AgentWebSocketRoute, [String: String])? {
        table.info(method: .get, path: path).webSocket
    }
}
