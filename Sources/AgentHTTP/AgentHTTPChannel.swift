import AgentCore
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1
import NIOWebSocket

/// The agent's HTTP/1 connection: NIO's response encoder, ``HTTP1RequestDecoder`` (NIO's
/// request decoder reporting each read), and ``HTTP1ConnectionHandler``, which runs the
/// connection's state machine and serves its requests from the pipeline (``AgentResponder``
/// over the routes, without `NIOAsyncChannel` per request).
///
/// The same channel serves a connection whatever its source (``AgentHTTPServing``): a
/// listener's accepted connections and connections handed over from elsewhere differ only
/// in their ``origin``, which every request's context carries.
///
/// A WebSocket handshake is only possible as a connection's first request: the route comes
/// from the route lookup the connection handler asked at the head, and the upgraded
/// connection runs the agent's own ``WebSocketSession`` on the connection's event loop.
struct AgentHTTPChannel: ServerChildChannel {
    /// What every upgraded connection of this channel gets.
    struct WebSocketConfiguration: Sendable {
        /// Largest frame payload NIO's frame decoder takes (a larger one is closed with 1009).
        var maxFrameSize: Int
        /// How long the client has to answer our close frame.
        var closeTimeout: Duration
    }

    typealias SessionRun = @Sendable (NIOAsyncChannel<WebSocketFrame, WebSocketFrame>, Logger) async -> Void

    enum Outcome: Sendable {
        /// Plain HTTP: the pipeline serves every request; the connection task only waits.
        case http
        case webSocket(NIOAsyncChannel<WebSocketFrame, WebSocketFrame>, SessionRun)
    }

    struct Value: ServerChildChannelValue {
        let outcome: EventLoopFuture<Outcome>
        let channel: any Channel
    }

    let http: HTTP1ConnectionHandler.Configuration
    let webSocket: WebSocketConfiguration
    let decoderLimits: (fieldSize: Int, listSize: Int, fieldCount: Int)
    /// Where the connections this value serves come from.
    let origin: ConnectionOrigin

    /// The same channel for connections from `origin`.
    func from(_ origin: ConnectionOrigin) -> AgentHTTPChannel {
        AgentHTTPChannel(http: http, webSocket: webSocket, decoderLimits: decoderLimits, origin: origin)
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let attempted = NIOLoopBoundBox<SessionRun?>(nil, eventLoop: channel.eventLoop)
            let route = NIOLoopBoundBox<RouteInfo?>(nil, eventLoop: channel.eventLoop)
            let upgrader = NIOTypedWebSocketServerUpgrader<Outcome>(
                maxFrameSize: webSocket.maxFrameSize,
                shouldUpgrade: { [self] channel, head in
                    attempted.value = route.value.flatMap { session(for: head, route: $0, channel: channel, logger: logger) }
                    return channel.eventLoop.makeSucceededFuture(attempted.value == nil ? nil : HTTPHeaders())
                },
                upgradePipelineHandler: { channel, _ in
                    channel.eventLoop.makeCompletedFuture {
                        // The connection's handler leaves once the reads held meanwhile went on.
                        let connection = try channel.pipeline.syncOperations.handler(type: HTTP1ConnectionHandler.self)
                        // Every route's inbound messages are bounded and checked before its handler.
                        try channel.pipeline.syncOperations.addHandler(WebSocketMessageGuard(connection: connection))
                        let frames = try NIOAsyncChannel<WebSocketFrame, WebSocketFrame>(
                            wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
                        return .webSocket(frames, attempted.value!)
                    }
                })
            let outcome = channel.eventLoop.makePromise(of: Outcome.self)
            var limits = NIOHTTPDecoderLimitConfiguration()
            limits.maxHeaderFieldSize = decoderLimits.fieldSize
            limits.maxHeaderListSize = decoderLimits.listSize
            limits.maxHeaderFieldCount = decoderLimits.fieldCount
            let connection = HTTP1ConnectionHandler(
                configuration: http, origin: origin, upgrade: WebSocketUpgrade(upgrader: upgrader, outcome: outcome, route: route))
            let pipeline = channel.pipeline.syncOperations
            // First: the connection's raw writes go ahead of it (HTTP1ConnectionHandler.raw).
            try pipeline.addHandler(HTTPResponseEncoder())
            // Bytes left in the decoder at an upgrade are client frames: forwarded when it leaves.
            try pipeline.addHandler(ByteToMessageHandler(HTTP1RequestDecoder(limits: limits, connection: connection)))
            try pipeline.addHandler(connection)
            return Value(outcome: outcome.futureResult, channel: channel)
        }
    }

    func handle(value: Value, logger: Logger) async {
        guard let outcome = try? await value.outcome.get() else { return }
        switch outcome {
        case .http:
            try? await value.channel.closeFuture.get()
        case .webSocket(let frames, let session):
            await session(frames, logger)
        }
    }

    /// The WebSocket session for a handshake the connection's state machine let through (its
    /// route, resolved at the head, ran its check and `prepare`), or nil if the request
    /// cannot be read as one.
    private func session(for head: HTTPRequestHead, route resolved: RouteInfo, channel: any Channel, logger: Logger) -> SessionRun? {
        guard let (route, parameters) = resolved.webSocket,
            let request = try? Request(head: HTTPRequest(agentHead: head), body: RequestBody(buffer: ByteBuffer()))
        else { return nil }
        var requestContext = AgentRequestContext(source: .init(channel: channel, logger: logger), origin: origin)
        // The same watch for the client going as the connection's plain requests had (it
        // outlives its removal from the pipeline: it follows the channel's close).
        requestContext.connectionObserver = (try? channel.pipeline.syncOperations.handler(type: HTTP1ConnectionHandler.self))?.connectionObserver
        for (name, value) in parameters {
            requestContext.coreContext.parameters.append(key: Substring(name), value: Substring(value))
        }
        let context = AgentWebSocketContext(request: request, requestContext: requestContext)
        let configuration = WebSocketSession.Machine.Configuration(closeTimeout: webSocket.closeTimeout)
        let handler = route.handler
        let timers = resolved.timers
        let method = request.method
        let start = NIODeadline.now().uptimeNanoseconds
        let accessLog = http.accessLog
        var access = AccessLog.Entry(method: head.method.rawValue, uri: head.uri)
        access.status = 101
        let listener = origin.listener
        let run: SessionRun = { [access] frames, logger in
            await WebSocketSession.run(frames, configuration: configuration, logger: logger) { inbound, outbound in
                try await handler(inbound, outbound, context)
            }
            // A WebSocket route counts once its session ends: status 101, the duration from
            // the handshake to the close (how long the stream lasted).
            timers?.record(method: method, status: .switchingProtocols, nanoseconds: NIODeadline.now().uptimeNanoseconds &- start)
            // Its access-log line too: status 101, the session's length.
            accessLog.record(access, listener: listener)
        }
        // On the connection's loop whatever the route's executor: a session is a pump of
        // awaits on its frames, and on the global executor (as wide as the cores) a stalled
        // subscriber's disconnect waited behind every blocked task of a loaded host.
        let loop = channel.eventLoop
        return { frames, logger in
            await withTaskExecutorPreference(EventLoopTaskExecutor(loop)) { await run(frames, logger) }
        }
    }
}
