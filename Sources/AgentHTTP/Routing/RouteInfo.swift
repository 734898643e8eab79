import HTTPTypes

/// How a route takes its request body.
public enum RouteBodyMode: Sendable, Equatable {
    /// At most `limit` bytes (a larger declared length is answered 413 before the body is
    /// read), with a total deadline for the whole body.
    case collect(limit: Int)
    /// Streamed to the handler, which reads it itself: no size cap; the deadline is an idle
    /// one (`idle` without a byte closes the connection).
    case stream(idle: Duration)
}

/// Where a route's handler runs.
public enum RouteExecutor: Sendable, Equatable {
    /// The handler pool (``HandlerPoolExecutor``, the default): a handler that spawns,
    /// touches the disk or computes never holds a connection's event loop.
    case pool
    /// The connection's event loop: only for audited handlers that never block (health,
    /// small in-memory answers), which then answer without a thread hop.
    case eventLoop
}

extension RouteExecutor {
    /// The handler pool as a task executor: for an `.eventLoop` handler that takes one
    /// blocking step only on some requests (`withTaskExecutorPreference(RouteExecutor.poolExecutor)`).
    public static var poolExecutor: any TaskExecutor { HandlerPoolExecutor.shared }
}

/// The route a request head matches, resolved once at the head and carried with the
/// request: how to take the body, where to run the handler, whether the path is a WebSocket
/// route (with its path parameters), and what the responder runs (``resolution``), so that
/// neither the responder nor the WebSocket upgrade looks the path up again.
///
/// A class with constant fields: it travels through the connection's machine, queue and task
/// as one reference (a struct of these fields cost a retain and release per field at every
/// copy, about 0.4 us per request under load).
public final class RouteInfo: Sendable {
    public let body: RouteBodyMode
    public let executor: RouteExecutor
    public let webSocket: (route: AgentWebSocketRoute, parameters: [String: String])?
    /// The route table's answer for the head (nil: built by hand, resolved by the responder).
    let resolution: RouteTable.Resolution?
    /// The path that was looked up (the target without its query).
    let path: Substring

    public convenience init(
        body: RouteBodyMode, executor: RouteExecutor,
        webSocket: (route: AgentWebSocketRoute, parameters: [String: String])? = nil
    ) {
        self.init(body: body, executor: executor, webSocket: webSocket, resolution: nil, path: "")
    }

    init(
        body: RouteBodyMode, executor: RouteExecutor, webSocket: (route: AgentWebSocketRoute, parameters: [String: String])?,
        resolution: RouteTable.Resolution?, path: Substring
    ) {
        self.body = body
        self.executor = executor
        self.webSocket = webSocket
        self.resolution = resolution
        self.path = path
    }

    /// The route's constant answer with its endpoint, when it has one and runs on the loop.
    var constant: (answer: ConstantAnswer, method: HTTPRequest.Method, endpoint: RouteTable.Endpoint)? {
        guard executor == .eventLoop, case .route(let route, let endpoint, _)? = resolution, let answer = route.constant else { return nil }
        return (answer, route.method, endpoint)
    }

    /// The request-duration timers of the path's endpoint, if it has one.
    var timers: RequestTimers? {
        switch resolution {
        case .route(_, let endpoint, _), .methodNotAllowed(let endpoint): endpoint.timers
        case .notFound, nil: nil
        }
    }
}

/// Answers ``RouteInfo`` for a request head (method and path without the query). The one
/// route table implements it; the connection core asks it once per request head.
protocol RouteLookup: Sendable {
    func info(method: HTTPRequest.Method, path: Substring) -> RouteInfo
}
