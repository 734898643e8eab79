import CoreMetrics
import HTTPTypes
@_spi(Internal) import Hummingbird

/// Collects the agent's routes (the capability modules' `RouteCollection`s, the WebSocket
/// twins, `/healthz`) and builds an ``AgentResponder`` from them.
///
/// It matches paths with Hummingbird's own route trie, so routing is Hummingbird's (literal
/// components before captures, `:id` parameters, wildcards), but dispatches without
/// Hummingbird's `RouterResponder` layers: the request metrics and the JSON error mapping,
/// which every route has, are plain code in ``AgentResponder`` instead of two middleware
/// layers around each route (measured with `agent-bench http`, docs/benchmarks.md "Core performance").
/// Middleware added here wraps the routes added after it, as with Hummingbird's `Router`.
public final class AgentRouter: RouterMethods {
    public typealias Context = AgentRequestContext

    /// One path's handlers, in the order added.
    private struct Entry {
        let path: RouterPath
        var methods: [(HTTPRequest.Method, any HTTPResponder<Context>)]
    }

    /// One per path (equal components; a few dozen, so a scan finds them).
    private var entries: [Entry] = []
    private var middlewares: [any MiddlewareProtocol<Request, Response, Context>] = []

    /// Where request timers are made (nil: the bootstrapped metrics system).
    private let metrics: (any MetricsFactory)?

    /// - Parameter metrics: where the request-duration timers go (tests pass their own).
    public init(metrics: (any MetricsFactory)? = nil) { self.metrics = metrics }

    /// Adds `responder` for `method` at `path` (wrapped in the middleware added so far). A
    /// second handler for the same path and method is a programming error, as in Hummingbird.
    @discardableResult
    public func on<Responder: HTTPResponder>(
        _ path: RouterPath, method: HTTPRequest.Method, responder: Responder
    ) -> Self where Responder.Context == Context {
        let wrapped = wrap(responder)
        if let at = entries.firstIndex(where: { $0.path == path }) {
            precondition(!entries[at].methods.contains { $0.0 == method }, "\(method.rawValue) \(path) already has a handler")
            entries[at].methods.append((method, wrapped))
        } else {
            entries.append(Entry(path: path, methods: [(method, wrapped)]))
        }
        return self
    }

    /// Wraps the routes added after this call (and the not-found answer) in `middleware`.
    @discardableResult
    public func add(middleware: any MiddlewareProtocol<Request, Response, Context>) -> Self {
        middlewares.append(middleware)
        return self
    }

    /// `responder` inside the middleware added so far (the first added outermost).
    private func wrap(_ responder: any HTTPResponder<Context>) -> any HTTPResponder<Context> {
        middlewares.reversed().reduce(responder) { next, middleware in MiddlewareLayer(middleware: middleware, next: next) }
    }

    /// Every route added so far as (method, path), in the order added; the path as
    /// Hummingbird prints it (`/api/v0/processes/{id}/output`). Logged at trace level when a
    /// listener starts, which is how `OpenAPIDocumentTests` learns what the agent mounts.
    public var routeList: [(method: String, path: String)] {
        entries.flatMap { entry in entry.methods.map { (method: $0.0.rawValue, path: entry.path.description) } }
    }

    /// Throws when a route can never be reached because an earlier one matches its paths
    /// (Hummingbird's `Router.validate()`, run over the same paths and methods).
    public func validate() throws {
        let check = Router(context: Context.self)
        for entry in entries {
            for (method, _) in entry.methods { check.on(entry.path, method: method) { _, _ in Response(status: .ok) } }
        }
        try check.validate()
    }

    /// The responder for the routes added so far.
    public func buildResponder() -> AgentResponder {
        #if DEBUG
        // As Hummingbird's Router does in debug builds: clashing routes fail the tests.
        do { try validate() } catch { assertionFailure("\(error)") }
        #endif
        let builder = RouterPathTrieBuilder<AgentEndpoint>()
        let endpoints = entries.map { AgentEndpoint(route: $0.path.description, methods: $0.methods, metrics: metrics) }
        for (entry, endpoint) in zip(entries, endpoints) { builder.addEntry(entry.path, value: endpoint) }
        let trie = builder.build()
        let matcher = RouteMatcher(routes: zip(entries, endpoints).map { ($0.path, $1) })
        return AgentResponder(
            trie: trie, matcher: matcher, notFound: wrap(RouteNotFoundResponder()),
            unrouted: RequestTimers(route: "NotFound", factory: metrics))
    }
}

/// One routed path: its handlers by method and its request-duration timers.
final class AgentEndpoint: Sendable {
    /// The route as the metrics label it (`/api/v0/processes/{id}/output`).
    let route: String
    /// At most the nine standard methods and a few others: a scan beats hashing.
    let methods: [(HTTPRequest.Method, any HTTPResponder<AgentRequestContext>)]
    let timers: RequestTimers

    init(route: String, methods: [(HTTPRequest.Method, any HTTPResponder<AgentRequestContext>)], metrics: (any MetricsFactory)? = nil) {
        self.route = route
        self.methods = methods
        self.timers = RequestTimers(route: route, factory: metrics)
    }

    func responder(for method: HTTPRequest.Method) -> (any HTTPResponder<AgentRequestContext>)? {
        for (candidate, responder) in methods where candidate == method { return responder }
        return nil
    }

    /// 405 for a method this path has no handler for, its `Allow` naming those it has.
    func methodNotAllowed(_ request: Request) -> APIError {
        var error = APIError(.methodNotAllowed, "Method not allowed.", detail: "\(request.method) \(request.uri.path); allowed: \(allow)")
        error.headers[.allow] = allow
        return error
    }

    /// The path's methods for `Allow` (`GET, POST`).
    private var allow: String { methods.map(\.0.rawValue).joined(separator: ", ") }
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

/// Answers a path no route matches (the responder turns it into the JSON 404).
struct RouteNotFoundResponder: HTTPResponder {
    typealias Context = AgentRequestContext

    func respond(to request: Request, context: Context) async throws -> Response {
        // As Hummingbird's own not-found responder labels it (a connection's context is
        // reused, so the previous request's route must not stay).
        context.coreContext.endpointPath.value = "NotFound"
        throw HTTPError(.notFound)
    }
}
