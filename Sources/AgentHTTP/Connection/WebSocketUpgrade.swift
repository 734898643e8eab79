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
    /// Where the switch is. NIO forces it on the handler: once the handshake ended its reads
    /// are raw bytes, not request parts, and its removal at the end does not end the connection.
    private(set) var phase = Phase.none

    enum Phase {
        case none
        /// The handshake ended: the decoder stops, then leaves; reads are held.
        case switching
        /// The frame handlers are in place and have the held reads; the handler leaves.
        case handedOver
    }
    /// Reads that arrive while the connection switches (the decoder has left, the frame
    /// handlers are not in yet), and their size: at most
    /// ``HTTP1ConnectionStateMachine/maxHeldBytes`` before the connection closes.
    private(set) var held: [NIOAny] = []
    private(set) var heldBytes = 0

    init(
        upgrader: NIOTypedWebSocketServerUpgrader<AgentHTTPChannel.Outcome>, outcome: EventLoopPromise<AgentHTTPChannel.Outcome>,
        route: NIOLoopBoundBox<RouteInfo?>
    ) {
        self.upgrader = upgrader
        self.outcome = outcome
        self.route = route
    }

    /// The handshake ended: reads from here on are raw bytes.
    func switching() { phase = .switching }

    /// The frame handlers are in place: the reads held meanwhile, for them.
    func handOver() -> [NIOAny] {
        phase = .handedOver
        defer {
            held = []
            heldBytes = 0
        }
        return held
    }

    func succeed(_ value: AgentHTTPChannel.Outcome) {
        guard !settled else { return }
        settled = true
        outcome.succeed(value)
    }

    /// The connection ended without an upgrade: its task has nothing to run.
    func connectionEnded() {
        succeed(.http)
        held = []
    }

    /// Holds `read` (of `count` bytes); the total held so far.
    func hold(_ read: NIOAny, count: Int) -> Int {
        held.append(read)
        heldBytes += count
        return heldBytes
    }
}

extension HTTP1ConnectionHandler {
    /// The handshake's request ended: answer 101 and hand the connection to the WebSocket
    /// handlers in the order of NIO's `NIOTypedHTTPServerUpgradeHandler`: the decoder leaves
    /// (forwarding the bytes it holds behind the handshake: the client's first frames), the
    /// 101 goes out, the encoder leaves, NIO's WebSocket upgrader adds the frame handlers, and
    /// the reads held meanwhile go to them before this handler leaves. A handshake the
    /// upgrader will not take (its session cannot be made) is answered 400.
    ///
    /// Not NIO's upgrade handler itself: it decides at the head and answers before the
    /// request's end, whereas here the connection's state machine admits a handshake (only
    /// as a connection's first request, within the WebSocket budget, after the route's
    /// check and `prepare`, under the connection's deadlines and pipelining bound) with the
    /// route resolved once at the head, and the access log and phases follow it.
    func beginUpgrade() {
        guard let (head, route) = handshake, let context else { return }
        handshake = nil
        upgrade.route.value = route
        upgrade.switching()
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
                let decoderGone =
                    (try? pipeline.handler(type: ByteToMessageHandler<HTTP1RequestDecoder>.self)).map { pipeline.removeHandler($0) }
                    ?? context.eventLoop.makeSucceededVoidFuture()
                decoderGone.assumeIsolated()
                    .flatMap {
                        context.writeAndFlush(self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .switchingProtocols, headers: headers))))
                    }
                    .flatMap { () -> EventLoopFuture<AgentHTTPChannel.Outcome> in
                        self.raw = nil
                        if let encoder = try? pipeline.handler(type: HTTPResponseEncoder.self) { pipeline.removeHandler(encoder, promise: nil) }
                        return self.upgrade.upgrader.upgrade(channel: channel, upgradeRequest: head)
                    }
                    .whenComplete { [self] result in
                        guard case .success(let outcome) = result, channel.isActive else {
                            channel.close(promise: nil)
                            return
                        }
                        raw = try? pipeline.context(handlerType: WebSocketFrameEncoder.self)
                        upgrade.succeed(outcome)
                        perform(machine.webSocketAnswered(now: clock.now))
                        let reads = upgrade.handOver()
                        for read in reads { context.fireChannelRead(read) }
                        if !reads.isEmpty { context.fireChannelReadComplete() }
                        pipeline.removeHandler(context: context, promise: nil)
                    }
            }
    }

    /// A raw read while the connection switches: held for the frame handlers (bounded by the
    /// machine: ``HTTP1ConnectionStateMachine/maxHeldBytes``).
    func holdDuringUpgrade(_ data: NIOAny) {
        let count = ByteToMessageHandler<HTTP1RequestDecoder>.unwrapInboundIn(data).readableBytes
        perform(machine.bytesHeld(upgrade.hold(data, count: count)))
    }

    /// The channel closed after the upgrade (this handler had left the pipeline), or the
    /// message guard left with it.
    func closedAfterUpgrade() {
        guard context == nil else { return }
        connectionEnded()
    }
}
