import HTTPTypes
import Hummingbird

/// One route with every property the server needs, declared in one place: the method and
/// path (relative to the module's mount point; `:id` or `{id}` captures one component), how
/// the body is taken, where the handler runs, the WebSocket upgrade if it is one, and the
/// handler (Hummingbird's `HTTPResponder`: `Request` in, `Response` out).
public struct AgentRoute: Sendable {
    public var method: HTTPRequest.Method
    public var path: String
    public var body: RouteBodyMode
    public var executor: RouteExecutor
    /// A WebSocket route: the handshake upgrades to it; `handler` is its plain-HTTP twin,
    /// which answers requests that are not an upgrade (the check's refusal, 400, 426).
    public var upgrade: AgentWebSocketRoute?
    public var handler: any HTTPResponder<AgentRequestContext>
    /// An answer made at once from memory, for a route on the loop with no middleware: the
    /// connection runs it without a task (``handler`` answers the same for other callers).
    /// Wrapping the route in middleware drops it.
    public var immediate: ImmediateHandler?
    /// An answer that never changes: the connection writes it without a request value, in
    /// place of ``immediate`` and ``handler`` (which give the same answer to other callers).
    /// Wrapping the route in middleware drops it.
    public internal(set) var constant: ConstantAnswer?

    /// Answers a request at once, without suspending.
    public typealias ImmediateHandler = @Sendable (Request, AgentRequestContext) throws -> ImmediateResponse

    /// The default body: collected, up to ``AgentHTTPLimits/maxRequestBody``.
    public static let collectedBody = RouteBodyMode.collect(limit: AgentHTTPLimits.maxRequestBody)
    /// A body streamed to its handler, closed after ``AgentHTTPLimits/requestBodyTimeout``
    /// without a byte.
    public static let streamedBody = RouteBodyMode.stream(idle: AgentHTTPLimits.requestBodyTimeout)

    public init(
        _ method: HTTPRequest.Method, _ path: String, body: RouteBodyMode = AgentRoute.collectedBody,
        executor: RouteExecutor = .pool, upgrade: AgentWebSocketRoute? = nil, handler: any HTTPResponder<AgentRequestContext>
    ) {
        self.method = method
        self.path = path
        self.body = body
        self.executor = executor
        self.upgrade = upgrade
        self.handler = handler
    }

    /// A route on the loop that answers at once (`immediate`, also behind ``handler``).
    public init(_ method: HTTPRequest.Method, _ path: String, immediate: @escaping ImmediateHandler) {
        self.init(method, path, executor: .eventLoop, handler: ClosureResponder { request, context in try immediate(request, context).response })
        self.immediate = immediate
    }

    /// A route on the loop that always gives `answer` (`/healthz`).
    public init(_ method: HTTPRequest.Method, _ path: String, answer: ImmediateResponse) {
        self.init(method, path) { _, _ in answer }
        self.constant = ConstantAnswer(answer)
    }

    /// A WebSocket route (a GET) with its plain-HTTP twin as the handler.
    public init(webSocket route: AgentWebSocketRoute, executor: RouteExecutor = .pool) {
        self.init(.get, route.path, executor: executor, upgrade: route, handler: WebSocketTwinResponder(route: route))
    }

    /// `/a/b` from `/a` and `b` (or `/a/` and `/b`); `/` for nothing.
    static func join(_ base: String, _ path: String) -> String {
        "/" + (base.split(separator: "/") + path.split(separator: "/")).joined(separator: "/")
    }

    /// The route with `base` in front of its path (and of its upgrade's).
    func mounted(at base: String) -> AgentRoute {
        var route = self
        route.path = Self.join(base, path)
        if let upgrade {
            route.upgrade = AgentWebSocketRoute(path: route.path, check: upgrade.check, prepare: upgrade.prepare, handler: upgrade.handler)
        }
        return route
    }
}

/// A closure as a responder (what `get`/`post` give ``AgentRoutes``).
struct ClosureResponder<Output: ResponseGenerator>: HTTPResponder {
    typealias Context = AgentRequestContext
    let closure: @Sendable (Request, AgentRequestContext) async throws -> Output

    func respond(to request: Request, context: AgentRequestContext) async throws -> Response {
        try await closure(request, context).response(from: request, context: context)
    }
}

/// One middleware around the responder it calls next.
struct MiddlewareLayer: HTTPResponder {
    typealias Context = AgentRequestContext
    let middleware: any MiddlewareProtocol<Request, Response, Context>
    let next: any HTTPResponder<Context>

    func respond(to request: Request, context: Context) async throws -> Response {
        try await middleware.handle(request, context: context, next: next.respond(to:context:))
    }
}

extension Array where Element == any MiddlewareProtocol<Request, Response, AgentRequestContext> {
    /// `responder` inside these middlewares (the first outermost).
    func wrapping(_ responder: any HTTPResponder<AgentRequestContext>) -> any HTTPResponder<AgentRequestContext> {
        reversed().reduce(responder) { next, middleware in MiddlewareLayer(middleware: middleware, next: next) }
    }
}
