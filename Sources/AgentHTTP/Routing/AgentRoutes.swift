import HTTPTypes
import Hummingbird

/// A module's routes as it declares them (``HTTPModule/routes(_:)``), paths relative to its
/// mount point. Middleware added wraps the routes added after it, as in Hummingbird's
/// `RouteCollection`; WebSocket routes are not wrapped (their check runs before anything).
public struct AgentRoutes {
    /// The routes as added, handlers wrapped in the middleware added before them.
    public private(set) var routes: [AgentRoute] = []
    private var middlewares: [any MiddlewareProtocol<Request, Response, AgentRequestContext>] = []

    public init() {}

    /// Wraps the routes added after this call in `middleware` (the first added outermost).
    public mutating func add(middleware: any MiddlewareProtocol<Request, Response, AgentRequestContext>) {
        middlewares.append(middleware)
    }

    /// Adds `route`, its handler wrapped in the middleware added so far (not a WebSocket
    /// route's twin).
    public mutating func add(_ route: AgentRoute) {
        var route = route
        if route.upgrade == nil, !middlewares.isEmpty {
            route.handler = middlewares.wrapping(route.handler)
            route.immediate = nil
            route.constant = nil
        }
        routes.append(route)
    }

    /// Adds every route of `other` under `path` (their middleware kept, this one's added
    /// around them).
    public mutating func add(_ other: AgentRoutes, at path: String = "") {
        for route in other.routes { add(route.mounted(at: path)) }
    }

    /// Adds a handler for `method` at `path`.
    public mutating func on(
        _ method: HTTPRequest.Method, _ path: String = "", body: RouteBodyMode = AgentRoute.collectedBody, executor: RouteExecutor = .pool,
        use handler: @escaping @Sendable (Request, AgentRequestContext) async throws -> some ResponseGenerator
    ) {
        add(AgentRoute(method, path, body: body, executor: executor, handler: ClosureResponder(closure: handler)))
    }

    public mutating func get(
        _ path: String = "", executor: RouteExecutor = .pool,
        use handler: @escaping @Sendable (Request, AgentRequestContext) async throws -> some ResponseGenerator
    ) {
        on(.get, path, executor: executor, use: handler)
    }

    public mutating func post(
        _ path: String = "", body: RouteBodyMode = AgentRoute.collectedBody, executor: RouteExecutor = .pool,
        use handler: @escaping @Sendable (Request, AgentRequestContext) async throws -> some ResponseGenerator
    ) {
        on(.post, path, body: body, executor: executor, use: handler)
    }

    public mutating func put(
        _ path: String = "", body: RouteBodyMode = AgentRoute.collectedBody, executor: RouteExecutor = .pool,
        use handler: @escaping @Sendable (Request, AgentRequestContext) async throws -> some ResponseGenerator
    ) {
        on(.put, path, body: body, executor: executor, use: handler)
    }

    public mutating func delete(
        _ path: String = "", executor: RouteExecutor = .pool,
        use handler: @escaping @Sendable (Request, AgentRequestContext) async throws -> some ResponseGenerator
    ) {
        on(.delete, path, executor: executor, use: handler)
    }

    /// Adds a WebSocket route (its path relative to the mount point).
    public mutating func webSocket(_ route: AgentWebSocketRoute, executor: RouteExecutor = .pool) {
        add(AgentRoute(webSocket: route, executor: executor))
    }

    /// Adds a WebSocket route at `path` (`:id/stream`).
    public mutating func webSocket(
        _ path: String, executor: RouteExecutor = .pool, check: @escaping AgentWebSocketRoute.Check,
        prepare: AgentWebSocketRoute.Prepare? = nil, handler: @escaping AgentWebSocketRoute.Handler
    ) {
        webSocket(AgentWebSocketRoute(path: path, check: check, prepare: prepare, handler: handler), executor: executor)
    }
}
