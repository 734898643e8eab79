import Hummingbird
import HummingbirdWebSocket
import NIOCore

/// The request context every agent route sees, HTTP and WebSocket alike.
///
/// It keeps the connection's channel so long-polling handlers can notice a client that
/// went away (see ``AgentRequestContext/clientGone``).
public struct AgentRequestContext: RequestContext, WebSocketRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let webSocket: WebSocketHandlerReference<Self>
    /// The connection this request arrived on.
    public let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.webSocket = .init()
        self.channel = source.channel
    }

    /// Bodies larger than this are refused with 413 (1 MiB: commands, env and JSON fit easily).
    public var maxUploadSize: Int { AgentHTTPLimits.maxRequestBody }

    /// Completes when the client half-closed or closed the connection, or it failed.
    ///
    /// Hummingbird does not cancel a handler when its client disappears; long waits race
    /// against this instead.
    public var clientGone: EventLoopFuture<Void> {
        let channel = self.channel
        return channel.pipeline.handler(type: ConnectionObserver.self)
            .flatMap { $0.gone }
            .flatMapError { _ in channel.closeFuture }
    }
}

/// Limits shared by every route.
public enum AgentHTTPLimits {
    /// Largest accepted request body, in bytes.
    public static let maxRequestBody = 1 << 20
    /// Most concurrent HTTP connections the server accepts; more wait in the backlog.
    public static let maxConnections = 4096
}
