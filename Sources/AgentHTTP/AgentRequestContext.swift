import AgentCore
import Hummingbird
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

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.channel = source.channel
    }

    /// Bodies larger than this are refused with 413 (1 MiB: commands, env and JSON fit easily).
    public var maxUploadSize: Int { AgentHTTPLimits.maxRequestBody }

    /// Tells when the client half-closed or closed the connection, or it failed.
    ///
    /// Hummingbird does not cancel a handler when its client disappears; long waits race
    /// against this instead, and withdraw their registration when they end.
    public var clientGone: any GoneSignal {
        // A context the HTTP channel did not make (a WebSocket session's): the channel's close.
        connectionObserver ?? ChannelClosedSignal(channel: channel)
    }
}

/// The close of a channel without a ``ConnectionObserver``. Its registrations cannot be
/// withdrawn (each stays with the close future until the channel closes), so it is only
/// the fallback for contexts the HTTP channel did not make.
struct ChannelClosedSignal: GoneSignal {
    let channel: any Channel

    func whenGone(_ action: @escaping @Sendable () -> Void) -> GoneRegistration {
        channel.closeFuture.whenComplete { _ in action() }
        return .none
    }
}

/// Limits shared by every route.
public enum AgentHTTPLimits {
    /// Largest accepted request body, in bytes.
    public static let maxRequestBody = 1 << 20
    /// Most open HTTP connections; beyond it the longest-idle one is closed (or, when all are
    /// busy, the new one is refused). See ``HTTPConnectionRegistry``.
    public static let maxConnections = 4096
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
