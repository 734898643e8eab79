import AgentCore
import Hummingbird
import Logging
import NIOCore

/// The request context every agent route sees, HTTP and WebSocket alike.
///
/// It keeps the connection's channel so long-polling handlers can notice a client that
/// went away (see ``AgentRequestContext/clientGone``).
public struct AgentRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The connection this request arrived on.
    public let channel: any Channel
    /// The chat the request speaks for, set by ``ChatIdentityMiddleware`` (nil: no chat).
    public var chat: ChatIdentity?
    /// The connection's observer, when the HTTP channel made this context.
    var connectionObserver: ConnectionObserver?
    /// The connection core refused this request's WebSocket handshake for its key (the
    /// route's plain twin answers 400 instead of 426).
    var webSocketKeyRefused = false
    /// Where the connection came from.
    public let origin: ConnectionOrigin

    /// A context for a connection of the HTTP API's own listener (``ListenerName/http``).
    public init(source: ApplicationRequestContextSource) {
        self.init(source: source, origin: .http)
    }

    /// A context for a connection from `origin`; its logger carries the listener's name.
    public init(source: ApplicationRequestContextSource, origin: ConnectionOrigin) {
        self.coreContext = .init(source: source)
        self.channel = source.channel
        self.origin = origin
        logger[metadataKey: "listener"] = .string(origin.listener)
    }

    /// The listener the request came from (``ListenerName``): `"http"` for the HTTP API's
    /// own, `"tailnet"` for a connection the tailnet handed over.
    public var listener: String { origin.listener }

    /// The peer's address as text (`127.0.0.1:52110`, `[fd7a:115c:a1e0::1]:4242`): the one a
    /// handed-over connection came with, else the socket's; nil when neither is known (a
    /// unix socket's client).
    public var remote: String? {
        if let remote = origin.remote { return remote }
        guard let address = channel.remoteAddress, let ip = address.ipAddress, let port = address.port else { return nil }
        if case .v6 = address { return "[\(ip)]:\(port)" }
        return "\(ip):\(port)"
    }

    /// Bodies larger than this are refused with 413 (1 MiB: commands, env and JSON fit easily).
    public var maxUploadSize: Int { AgentHTTPLimits.maxRequestBody }

    /// Tells when the client half-closed or closed the connection, or it failed.
    ///
    /// Hummingbird does not cancel a handler when its client disappears; long waits race
    /// against this instead, and withdraw their registration when they end.
    public var clientGone: any GoneSignal {
        // A context the HTTP channel did not make: the same watch, on the channel's close.
        connectionObserver ?? ConnectionObserver(watching: channel)
    }
}

/// Limits shared by every route.
public enum AgentHTTPLimits {
    /// Largest accepted request body, in bytes.
    public static let maxRequestBody = 1 << 20
    /// Most open plain HTTP connections (WebSockets not included); beyond it the longest-idle
    /// one is closed (or, when all are busy, the new one is refused). See
    /// ``HTTPConnectionRegistry``.
    public static let maxConnections = 4096
    /// Most open WebSockets (upgraded, long-lived connections), a budget of their own beside
    /// ``maxConnections``: a handshake beyond it is answered 503 with a JSON error, and plain
    /// requests keep the whole connection cap however many streams are open.
    public static let maxWebSockets = 3072
    /// The server pings a WebSocket it has heard nothing from for this long; a peer that
    /// then sends nothing (no pong, no frame) for another interval is sent a close frame
    /// (1001) and disconnected. So a WebSocket whose peer answers nothing lasts at most two
    /// intervals.
    public static let webSocketPingInterval: Duration = .seconds(30)
    /// A response body write that waits this long for the socket to take data (the client
    /// reads nothing) closes the connection: a stalled download cannot hold a connection.
    public static let responseWriteStallTimeout: Duration = .seconds(30)
    /// A complete request head must arrive within this of the accept or of the end of the
    /// previous exchange.
    public static let requestHeadTimeout: Duration = .seconds(10)
    /// From a request's head to the end of its body (408 beyond).
    public static let requestBodyTimeout: Duration = .seconds(60)
    /// Request line and each header field (414 / 431 beyond).
    public static let maxHeaderFieldSize = 16 * 1024
    /// All header fields together (431 beyond).
    public static let maxHeaderListSize = 64 * 1024
    /// Header fields per request (431 beyond).
    public static let maxHeaderFieldCount = 200
}
