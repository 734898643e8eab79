import HTTPTypes

/// The route properties the connection core asks for at a request head, from the server's
/// streaming-upload paths and WebSocket routes: a streaming path takes its body as a stream
/// with an idle deadline, any other path collects at most the body limit; every handler runs
/// on the connection's event loop. A stand-in until the one route table answers it.
struct LegacyRouteLookup: RouteLookup {
    let streamingPaths: Set<String>
    let webSocketRoutes: WebSocketRouteTable
    /// The first path segment of every WebSocket route: most paths are ruled out without
    /// splitting them.
    private let webSocketFirstSegments: Set<Substring>
    let bodyTimeout: Duration
    let maxBody: Int

    init(streamingPaths: Set<String>, webSocketRoutes: [AgentWebSocketRoute], bodyTimeout: Duration, maxBody: Int) {
        self.streamingPaths = streamingPaths
        self.webSocketRoutes = WebSocketRouteTable(webSocketRoutes)
        self.webSocketFirstSegments = Set(webSocketRoutes.compactMap { $0.path.split(separator: "/").first })
        self.bodyTimeout = bodyTimeout
        self.maxBody = maxBody
    }

    func info(method: HTTPRequest.Method, path: Substring) -> RouteInfo {
        let body: RouteBodyMode =
            !streamingPaths.isEmpty && streamingPaths.contains(String(path)) ? .stream(idle: bodyTimeout) : .collect(limit: maxBody)
        var info = RouteInfo(body: body, executor: .eventLoop)
        if method == .get, let first = path.split(separator: "/", maxSplits: 1).first, webSocketFirstSegments.contains(first),
            let (route, parameters) = webSocketRoutes.match(path)
        {
            info.webSocket = (route, parameters)
        }
        return info
    }
}
