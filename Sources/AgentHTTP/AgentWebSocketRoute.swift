import HTTPTypes
import Hummingbird

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
/// 400), and answers plain requests to the same path (``WebSocketTwinResponder``) with the
/// check's error, a 400 for a malformed handshake, or 426. Declared in a module's
/// ``AgentRoutes`` with ``AgentRoutes/webSocket(_:executor:)``.
///
/// A route whose admission needs I/O (starting a desktop, reaching a server) adds an async
/// `prepare`, run after the check and before the upgrade; its error is answered as JSON
/// too (the plain twin runs it again, so it should remember a recent failure).
public struct AgentWebSocketRoute: Sendable {
    public typealias Check = @Sendable (WebSocketRouteRequest) throws(APIError) -> Void
    public typealias Prepare = @Sendable (WebSocketRouteRequest) async throws(APIError) -> Void
    /// The session once upgraded: the client's data frames, the writer, the request. When it
    /// returns the session closes with 1000 (1011 if it throws, or a thrown
    /// ``WebSocketCloseError``'s code).
    public typealias Handler = @Sendable (WebSocketInbound, WebSocketOutbound, AgentWebSocketContext) async throws -> Void

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

/// A WebSocket route's plain-HTTP twin, which answers what is not an upgrade: the route's
/// own refusal (404, 429, ...), 400 for a malformed handshake key, and otherwise 426 naming
/// the WebSocket version. (The upgrade itself is the channel's: ``AgentHTTPChannel``.)
struct WebSocketTwinResponder: HTTPResponder {
    typealias Context = AgentRequestContext
    let route: AgentWebSocketRoute

    func respond(to request: Request, context: AgentRequestContext) async throws -> Response {
        let admission = WebSocketRouteRequest(headers: request.headers, parameters: context.parameters.rawParameters)
        try route.check(admission)
        try await route.prepare?(admission)
        if context.webSocketKeyRefused {
            throw APIError(
                .badRequest, "Invalid WebSocket handshake.",
                detail: "Sec-WebSocket-Key must be one header holding 16 bytes in base64.")
        }
        var error = APIError(
            .upgradeRequired, "Expected a WebSocket upgrade request.",
            detail: "Send a WebSocket handshake over HTTP/1.1 with Sec-WebSocket-Version: 13.")
        error.headers = [.secWebSocketVersion: "13", .upgrade: "websocket", .connection: "Upgrade"]
        throw error
    }
}
