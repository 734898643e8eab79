import CoreMetrics
import HTTPTypes
import Hummingbird

/// Every route of every mount, `/healthz` and the WebSocket routes (with their plain-HTTP
/// twins) compiled into one trie (``RouteTrie``). It answers the responder (the handler,
/// its parameters, or 404/405 with `Allow`) and the connection core (``RouteLookup``: the
/// body mode, executor and upgrade of a request head's route).
public final class RouteTable: RouteLookup, Sendable {
    /// One routed path: its routes by method and its request-duration timers.
    final class Endpoint: Sendable {
        /// The path as metrics and the mounted-routes log show it (`/api/v0/processes/{id}/output`).
        let label: String
        /// At most the nine standard methods and a few others: a scan beats hashing.
        let routes: [AgentRoute]
        let timers: RequestTimers
        /// The path's methods for `Allow` (`GET, POST`), in the order added.
        let allow: String
        /// Its place in ``RouteTable/fixedInfos``.
        let index: Int

        init(label: String, routes: [AgentRoute], index: Int, metrics: (any MetricsFactory)?) {
            self.label = label
            self.index = index
            self.routes = routes
            self.timers = RequestTimers(route: label, factory: metrics)
            self.allow = routes.map(\.method.rawValue).joined(separator: ", ")
        }

        func route(for method: HTTPRequest.Method) -> AgentRoute? {
            for route in routes where route.method == method { return route }
            return nil
        }
    }

    /// What a request resolves to.
    enum Resolution: Sendable {
        case route(AgentRoute, Endpoint, [RouteTrie<Endpoint>.Capture])
        /// The path is routed, not for this method.
        case methodNotAllowed(Endpoint)
        case notFound
    }

    /// Why routes cannot form a table (a programming error in a module's declarations).
    public struct BuildError: Error, CustomStringConvertible {
        public let description: String
    }

    private let trie: RouteTrie<Endpoint>
    /// Per endpoint (by ``Endpoint/index``), the ``RouteInfo`` of each of its routes when its
    /// path captures nothing: the same for every request, so made once (nil: made per request).
    private let fixedInfos: [[RouteInfo]?]
    /// Every route as (method, label, upgrade), in the order added.
    let routeList: [(method: String, path: String, webSocket: Bool)]
    /// What a request head nothing routes is read with (its answer, 404 or 405, is cheap).
    static let unrouted = RouteInfo(body: AgentRoute.collectedBody, executor: .eventLoop)

    /// Answers a path no route has (inside the table's middleware).
    let notFound: any HTTPResponder<AgentRequestContext>
    /// Timers of requests no route matched.
    let unroutedTimers: RequestTimers

    /// Builds the table of `routes` (full paths). Throws for a second route with the same
    /// method and path, two capture names at one place, or a component of another kind
    /// (wildcards, `{name}.ext`: none is supported).
    /// - Parameters:
    ///   - middleware: wraps every route's handler and the not-found answer (the first
    ///     outermost).
    ///   - metrics: where the request-duration timers go (tests pass their own).
    public init(
        routes: [AgentRoute], middleware: [any MiddlewareProtocol<Request, Response, AgentRequestContext>] = [],
        metrics: (any MetricsFactory)? = nil
    ) throws(BuildError) {
        notFound = middleware.wrapping(RouteNotFoundResponder())
        unroutedTimers = RequestTimers(route: "NotFound", factory: metrics)
        var order: [String] = []
        var byLabel: [String: (components: [RouteTrie<Endpoint>.Component], routes: [AgentRoute])] = [:]
        var list: [(method: String, path: String, webSocket: Bool)] = []
        for var route in routes {
            if !middleware.isEmpty {
                route.handler = middleware.wrapping(route.handler)
                route.immediate = nil
                route.constant = nil
            }
            for part in route.path.split(separator: "/") where part.contains("*") || (part.contains("{") && !(part.first == "{" && part.last == "}")) {
                throw BuildError(description: "\(route.method) \(route.path): unsupported path component \"\(part)\"")
            }
            let components = RouteTrie<Endpoint>.components(route.path)
            let label = Self.label(components)
            if byLabel[label] == nil {
                order.append(label)
                byLabel[label] = (components, [])
            }
            guard !byLabel[label]!.routes.contains(where: { $0.method == route.method }) else {
                throw BuildError(description: "\(route.method) \(label) already has a handler")
            }
            byLabel[label]!.routes.append(route)
            list.append((route.method.rawValue, label, route.upgrade != nil))
        }
        let endpoints = order.enumerated().map { index, label in
            let entry = byLabel[label]!
            return (entry.components, Endpoint(label: label, routes: entry.routes, index: index, metrics: metrics))
        }
        fixedInfos = endpoints.map { components, endpoint in
            guard components.allSatisfy({ if case .literal = $0 { true } else { false } }) else { return nil }
            return endpoint.routes.map { route in
                RouteInfo(
                    body: route.body, executor: route.executor, webSocket: route.upgrade.map { ($0, [:]) },
                    resolution: .route(route, endpoint, []), path: Substring(endpoint.label))
            }
        }
        do {
            trie = try RouteTrie(endpoints)
        } catch {
            guard case .captureNames(let one, let other) = error else { throw BuildError(description: "\(error)") }
            throw BuildError(description: "two capture names at one place: \(one) and \(other)")
        }
        routeList = list
    }

    /// The table of every mount's routes at its base path, with `/healthz` first.
    public convenience init(
        mounts: [HTTPMount], middleware: [any MiddlewareProtocol<Request, Response, AgentRequestContext>] = [],
        metrics: (any MetricsFactory)? = nil
    ) throws(BuildError) {
        var routes = [Self.health]
        for mount in mounts {
            var declared = AgentRoutes()
            mount.module.routes(&declared)
            routes += declared.routes.map { $0.mounted(at: mount.path) }
        }
        try self.init(routes: routes, middleware: middleware, metrics: metrics)
    }

    /// `GET /healthz`: its answer encoded once (probes come often and it never changes),
    /// given at once on the event loop (it does nothing else).
    static let health: AgentRoute = {
        AgentRoute(.get, "/healthz", answer: ImmediateResponse.json(["status": "ok"]))
    }()

    /// `/a/{id}` for `/a/:id`.
    static func label(_ components: [RouteTrie<Endpoint>.Component]) -> String {
        "/"
            + components.map { component in
                switch component {
                case .literal(let text): String(decoding: text, as: UTF8.self)
                case .capture(let name): "{\(name)}"
                }
            }.joined(separator: "/")
    }

    /// The route of `method` at `path` (no query), its endpoint and captures.
    func resolve(method: HTTPRequest.Method, path: Substring) -> Resolution {
        guard let (endpoint, captures) = trie.resolve(path) else { return .notFound }
        guard let route = endpoint.route(for: method) else { return .methodNotAllowed(endpoint) }
        return .route(route, endpoint, captures)
    }

    /// The endpoint `path` resolves to, whatever the method.
    func endpoint(_ path: Substring) -> Endpoint? {
        trie.resolve(path)?.value
    }

    public func info(method: HTTPRequest.Method, path: Substring) -> RouteInfo {
        let resolution = resolve(method: method, path: path)
        guard case .route(let route, let endpoint, let captures) = resolution else {
            let unrouted = Self.unrouted
            return RouteInfo(body: unrouted.body, executor: unrouted.executor, webSocket: nil, resolution: resolution, path: path)
        }
        if let fixed = fixedInfos[endpoint.index], let offset = endpoint.routes.firstIndex(where: { $0.method == method }) {
            return fixed[offset]
        }
        let webSocket = route.upgrade.map { ($0, Self.parameters(captures, of: path)) }
        return RouteInfo(body: route.body, executor: route.executor, webSocket: webSocket, resolution: resolution, path: path)
    }

    /// The captures as `[name: value]`, values as they appear in `path`.
    static func parameters(_ captures: [RouteTrie<Endpoint>.Capture], of path: Substring) -> [String: String] {
        var out: [String: String] = [:]
        for capture in captures { out[String(capture.name)] = String(substring(path, capture.range)) }
        return out
    }

    /// The captures as Hummingbird's `Parameters` (what handlers read), slices of `path`.
    static func handlerParameters(_ captures: [RouteTrie<Endpoint>.Capture], of path: Substring) -> Parameters {
        var out = Parameters()
        for capture in captures { out[capture.name] = substring(path, capture.range) }
        return out
    }

    /// The bytes `range` of `path` (component boundaries are `/`, so always whole characters).
    private static func substring(_ path: Substring, _ range: Range<Int>) -> Substring {
        let utf8 = path.utf8
        let lower = utf8.index(utf8.startIndex, offsetBy: range.lowerBound)
        let upper = utf8.index(lower, offsetBy: range.count)
        return path[lower..<upper]
    }
}
