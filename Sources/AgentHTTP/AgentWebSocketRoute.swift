import HTTPTypes
import Hummingbird
import HummingbirdWebSocket

/// What an admission check sees of a WebSocket request: headers and path parameters
/// (raw, as they appear in the path).
public struct WebSocketRouteRequest: Sendable {
    public let headers: HTTPFields
    public let parameters: [String: String]

    public init(headers: HTTPFields, parameters: [String: String]) {
        self.headers = headers
        self.parameters = parameters
    }
}

/// A WebSocket route: a full path (`/api/v0/processes/:id/stream`), a synchronous admission
/// check, and the handler that runs once upgraded.
///
/// The server runs the check before the upgrade (so a refusal is a JSON error, not a bare
/// 400), registers the handler on the WebSocket router, and answers plain requests to the
/// same path with the check's error, a 400 for a malformed handshake, or 426.
///
/// A route whose admission needs I/O (starting a desktop, reaching a server) adds an async
/// `prepare`, run after the check and before the upgrade; its error is answered as JSON
/// too (the plain twin runs it again, so it should remember a recent failure).
public struct AgentWebSocketRoute: Sendable {
    public typealias Check = @Sendable (WebSocketRouteRequest) throws(APIError) -> Void
    public typealias Prepare = @Sendable (WebSocketRouteRequest) async throws(APIError) -> Void
    public typealias Handler = WebSocketDataHandler<AgentWebSocketContext>

    public let path: String
    public let check: Check
    public let prepare: Prepare?
    public let handler: Handler

    public init(path: String, check: @escaping Check, prepare: Prepare? = nil, handler: @escaping Handler) {
        self.path = path
        self.check = check
        self.prepare = prepare
        self.handler = handler
    }
}

/// The WebSocket routes, matched synchronously on the event loop before an upgrade.
struct WebSocketRouteTable: Sendable {
    private struct Entry: Sendable {
        var segments: [Substring]
        var route: AgentWebSocketRoute
        /// The route's `http.server.request.duration` timers, labelled as a plain route is
        /// (`/api/v0/processes/{id}/stream`).
        var timers: RequestTimers
    }

    private let entries: [Entry]

    init(_ routes: [AgentWebSocketRoute]) {
        entries = routes.map { route in
            let label = "/" + route.path.split(separator: "/").map { $0.first == ":" ? "{\($0.dropFirst())}" : String($0) }.joined(separator: "/")
            return Entry(segments: route.path.split(separator: "/"), route: route, timers: RequestTimers(route: label))
        }
    }

    /// The request-duration timers of the route `path` matches, if any.
    func timers(_ path: Substring) -> RequestTimers? {
        matchEntry(path)?.0.timers
    }

    /// The route for `path` (query excluded) and its parameters; `:name` matches one segment.
    func match(_ path: Substring) -> (AgentWebSocketRoute, [String: String])? {
        matchEntry(path).map { ($0.0.route, $0.1) }
    }

    private func matchEntry(_ path: Substring) -> (Entry, [String: String])? {
        let segments = path.split(separator: "/")
        for entry in entries where entry.segments.count == segments.count {
            var parameters: [String: String] = [:]
            var matched = true
            for (pattern, segment) in zip(entry.segments, segments) {
                if pattern.first == ":" {
                    parameters[String(pattern.dropFirst())] = String(segment)
                } else if pattern != segment {
                    matched = false
                    break
                }
            }
            if matched { return (entry, parameters) }
        }
        return nil
    }
}

/// Marks a request whose WebSocket handshake the connection guard refused, so that the
/// route's plain-HTTP twin answers it. Any copy sent by a client is removed first.
enum WebSocketRefusal {
    static let headerName = "x-workspace-agent-websocket-refusal"
    static let field = HTTPField.Name(headerName)!
    /// Wrong or missing `Sec-WebSocket-Version`.
    static let badVersion = "version"
    /// Missing, repeated or malformed `Sec-WebSocket-Key`.
    static let badKey = "key"
}
