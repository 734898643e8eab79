/// A module's WebSocket routes, with paths relative to where it is mounted (as Hummingbird's
/// `RouteCollection` for plain routes).
public struct WebSocketRouteCollection: Sendable {
    /// The routes as added (relative paths).
    public private(set) var routes: [AgentWebSocketRoute] = []

    public init() {}

    /// Adds a route: `path` relative to the mount point (`:id/stream`).
    public mutating func ws(
        _ path: String, check: @escaping AgentWebSocketRoute.Check, handler: @escaping AgentWebSocketRoute.Handler
    ) {
        routes.append(AgentWebSocketRoute(path: path, check: check, handler: handler))
    }

    /// Adds a route made elsewhere (its path relative to the mount point).
    public mutating func add(_ route: AgentWebSocketRoute) {
        routes.append(route)
    }

    /// The routes with `base` in front of their paths.
    func mounted(at base: String) -> [AgentWebSocketRoute] {
        routes.map { route in
            AgentWebSocketRoute(path: Self.join(base, route.path), check: route.check, prepare: route.prepare, handler: route.handler)
        }
    }

    /// `/a/b` from `/a` and `b` (or `/a/` and `/b`).
    static func join(_ base: String, _ path: String) -> String {
        let parts = (base.split(separator: "/") + path.split(separator: "/")).joined(separator: "/")
        return "/" + parts
    }
}
