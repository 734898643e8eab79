import NIOCore
import NIOHTTP1
import NIOWebSocket

/// One connection's WebSocket upgrade: NIO's upgrader (which builds the 101's fields and
/// installs the frame handlers), and the promise the connection's task waits on to learn
/// whether it serves a WebSocket session (or plain HTTP, settled when the connection ends).
///
/// Used only on the connection's event loop.
final class WebSocketUpgrade {
    let upgrader: NIOTypedWebSocketServerUpgrader<AgentHTTPChannel.Outcome>
    let outcome: EventLoopPromise<AgentHTTPChannel.Outcome>
    /// The handshake's route as the connection resolved it at the head, for the upgrader's
    /// session (no second lookup).
    let route: NIOLoopBoundBox<RouteInfo?>
    private var settled = false

    init(
        upgrader: NIOTypedWebSocketServerUpgrader<AgentHTTPChannel.Outcome>, outcome: EventLoopPromise<AgentHTTPChannel.Outcome>,
        route: NIOLoopBoundBox<RouteInfo?>
    ) {
        self.upgrader = upgrader
        self.outcome = outcome
        self.route = route
    }

    func succeed(_ value: AgentHTTPChannel.Outcome) {
        guard !settled else { return }
        settled = true
        outcome.succeed(value)
    }

    /// The connection ended without an upgrade: its task has nothing to run.
    func connectionEnded() { succeed(.http) }
}

extension HTTP1ConnectionHandler {
    /// The handshake's request ended: answer 101 and hand the connection to the WebSocket
    /// handlers, as NIO's upgrade handler does (decoder out, 101 out, encoder out, frame
    /// handlers in, then the bytes held meanwhile replayed); this handler leaves the
    /// pipeline. A handshake the upgrader will not take (its session cannot be made) is
    /// answered 400.
    func beginUpgrade() {
        guard let (head, route) = handshake, let context, let bytes else { return }
        handshake = nil
        upgrade.route.value = route
        guard bytes.switchToWebSocket() else {
            perform(machine.webSocketUnmasked())
            return
        }
        let channel = context.channel
        let pipeline = context.pipeline.syncOperations
        let initial = HTTPHeaders([("connection", "upgrade"), ("upgrade", "websocket")])
        upgrade.upgrader.buildUpgradeResponse(channel: channel, upgradeRequest: head, initialResponseHeaders: initial)
            .hop(to: context.eventLoop).assumeIsolated()
            .whenComplete { [self] result in
                guard case .success(let headers) = result, channel.isActive else {
                    perform(machine.upgradeFailed(now: clock.now))
                    return
                }
                if let decoder = try? pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self) {
                    pipeline.removeHandler(decoder, promise: nil)
                }
                context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .switchingProtocols, headers: headers))))
                    .assumeIsolated()
                    .flatMap { () -> EventLoopFuture<AgentHTTPChannel.Outcome> in
                        if let encoder = try? pipeline.handler(type: HTTPResponseEncoder.self) { pipeline.removeHandler(encoder, promise: nil) }
                        if let observer = try? pipeline.handler(type: ConnectionObserver.self) { pipeline.removeHandler(observer, promise: nil) }
                        pipeline.removeHandler(context: context, promise: nil)
                        return self.upgrade.upgrader.upgrade(channel: channel, upgradeRequest: head)
                    }
                    .whenComplete { [self] result in
                        guard case .success(let outcome) = result else {
                            channel.close(promise: nil)
                            return
                        }
                        upgrade.succeed(outcome)
                        perform(machine.webSocketAnswered(now: clock.now))
                        bytes.upgradeCompleted()
                    }
            }
    }

    /// The channel closed after the upgrade (this handler had left the pipeline), or the
    /// bytes handler left with it.
    func closedAfterUpgrade() {
        guard context == nil else { return }
        connectionEnded()
    }
}
