import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOHTTP1

/// Hummingbird's HTTP/1 + WebSocket-upgrade channel with the agent's guards around it:
/// ``ConnectionGuard`` first on the socket side (registry, raw error answers, WebSocket
/// masking) and ``HTTPRequestGuard`` right after the HTTP decoder (head deadline,
/// `Upgrade`, `Expect`, CONNECT, parse errors).
struct AgentHTTPChannel<Inner: ServerChildChannel>: ServerChildChannel {
    let inner: Inner
    let registry: HTTPConnectionRegistry
    let webSocketRoutes: WebSocketRouteTable
    let limits: HTTPRequestGuard.Limits

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Inner.Value> {
        inner.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let pipeline = channel.pipeline.syncOperations
            let connection = ConnectionGuard(registry: registry)
            try pipeline.addHandler(connection, position: .first)
            let decoder = try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try pipeline.addHandler(
                HTTPRequestGuard(connection: connection, webSocketRoutes: webSocketRoutes, limits: limits),
                position: .after(decoder))
            return value
        }
    }

    func handle(value: Inner.Value, logger: Logger) async {
        // A connection closed before its first request (idle, evicted, timed out, refused)
        // fails Hummingbird's upgrade future, which it logs as an error. That is routine
        // here and a local client could flood the log (and the control plane) with it.
        var logger = logger
        logger.logLevel = max(logger.logLevel, .critical)
        await withTaskExecutorPreference(EventLoopTaskExecutor(value.channel.eventLoop)) {
            await inner.handle(value: value, logger: logger)
        }
    }
}

extension HTTPServerBuilder {
    /// `http1WebSocketUpgrade` wrapped in ``AgentHTTPChannel``.
    static func agentHTTP(
        webSocketRouter: Router<AgentRequestContext>,
        configuration: HTTP1WebSocketUpgradeChannel.Configuration,
        registry: HTTPConnectionRegistry,
        webSocketRoutes: WebSocketRouteTable,
        limits: HTTPRequestGuard.Limits
    ) -> HTTPServerBuilder {
        let webSocketResponder = webSocketRouter.buildResponder()
        return HTTPServerBuilder { responder in
            AgentHTTPChannel(
                inner: HTTP1WebSocketUpgradeChannel(
                    responder: responder,
                    webSocketResponder: webSocketResponder,
                    configuration: configuration),
                registry: registry, webSocketRoutes: webSocketRoutes, limits: limits)
        }
    }
}
