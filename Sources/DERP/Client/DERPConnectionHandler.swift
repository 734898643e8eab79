import NIOCore

/// The client side of one DERP connection, after the transport is set up: reads frames
/// from the byte stream (raw, or WebSocket payloads), runs the handshake (ServerKey →
/// ClientInfo and NotePreferred → ServerInfo), answers Pings, watches liveness, and
/// reports packets and server notices to the delegate. Confined to the channel's loop.
///
/// Liveness: no frame for `readTimeout` closes the connection (the client reconnects).
/// Fatal: an invalid greeting, a ServerInfo that does not open, a header over 1 MiB, the
/// stream ending inside a frame. Skipped and counted: unknown types, frames too short for
/// their type.
final class DERPConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    struct Setup: Sendable {
        var privateKey: X25519PrivateKey
        var node: DERPNode
        var transport: DERPTransport
        var isHome: Bool
        var readTimeout: TimeAmount
        var maxQueuedPackets: Int
        var maxQueuedBytes: Int
        var counters: DERPCounters
        var delegate: any DERPConnectionDelegate
        var attempt: DERPConnectAttempt
        var ended: EventLoopPromise<DERPConnectionEnd>
    }

    private enum Phase {
        case awaitingServerKey
        case awaitingServerInfo(X25519PublicKey)
        case ready
        case done
    }

    private let setup: Setup
    private var phase = Phase.awaitingServerKey
    private var decoder = DERPFrameDecoder()
    private var lastFrame = NIODeadline.now()
    private var livenessTimer: Scheduled<Void>?
    private var failure: String?
    private var restarting: (reconnectIn: UInt32, tryFor: UInt32)?
    /// Pongs not yet written (at most ``PingAnswers/maxUnwritten``).
    private let pings = PingAnswers()

    init(_ setup: Setup) {
        self.setup = setup
    }

    func handlerAdded(context: ChannelHandlerContext) {
        lastFrame = .now()
        armLiveness(context: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .done = phase { return }
        decoder.feed(buffer: unwrapInboundIn(data))
        do throws(DERPWireError) {
            // Bounded: each frame consumes at least its 5-byte header of what was fed.
            while let raw = try decoder.next(limit: greetingLimit) {
                lastFrame = .now()
                setup.counters.received(bytes: DERPProtocol.headerLength + raw.payload.count)
                try handle(raw, context: context)
                if case .done = phase { return }
            }
        } catch {
            // Anything wrong with the first frame is a bad greeting, whatever its size.
            if case .awaitingServerKey = phase {
                fail(DERPWireError.invalidServerGreeting.description, context: context)
            } else {
                fail(error.description, context: context)
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if failure == nil {
            do throws(DERPWireError) {
                try decoder.finish()
                failure = "connection closed by the server"
            } catch {
                failure = error.description
            }
        }
        finish()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail("\(error)", context: context)
    }

    // MARK: Frames

    private var greetingLimit: Int? {
        if case .awaitingServerKey = phase { return DERPProtocol.maxGreetingLength }
        return nil
    }

    private func handle(_ raw: DERPRawFrame, context: ChannelHandlerContext) throws(DERPWireError) {
        if case .awaitingServerKey = phase {
            guard raw.type == DERPFrameType.serverKey, case .serverKey(let serverKey) = try DERPFrame(raw) else {
                throw .invalidServerGreeting
            }
            guard let info = DERPHandshake.clientInfo(privateKey: setup.privateKey, serverKey: serverKey) else {
                throw .malformed(type: raw.type, reason: "cannot seal the client info to this key")
            }
            // The phase moves first: a write that fails at once closes the channel from
            // inside it, and the close's `.done` must not be overwritten.
            phase = .awaitingServerInfo(serverKey)
            write(info, context: context, flush: !setup.isHome)
            if setup.isHome { write(.notePreferred(true), context: context, flush: true) }
            return
        }
        let frame: DERPFrame
        do {
            frame = try DERPFrame(raw)
        } catch {
            // The Go client skips frames too short for their type.
            setup.counters.dropped("malformed_frame")
            return
        }
        switch frame {
        case .serverInfo(let nonce, let sealed):
            guard case .awaitingServerInfo(let serverKey) = phase else { return }
            _ = try DERPHandshake.openServerInfo(nonce: nonce, sealed: sealed, privateKey: setup.privateKey, serverKey: serverKey)
            phase = .ready
            let connection = DERPConnection(
                channel: context.channel, node: setup.node, transport: setup.transport, serverKey: serverKey,
                ended: setup.ended.futureResult, counters: setup.counters, maxQueuedPackets: setup.maxQueuedPackets,
                maxQueuedBytes: setup.maxQueuedBytes)
            setup.attempt.succeed(connection)
        case .recvPacket(let source, let packet):
            setup.delegate.received(DERPReceivedPacket(source: source, packet: packet))
        case .keepAlive, .pong, .serverKey, .notePreferred, .clientInfo, .sendPacket:
            break
        case .peerGone(let key, let reason):
            setup.delegate.peerGone(key, reason: reason)
        case .ping(let data):
            let pong = DERPFrame.pong(data).encoded
            let sent = pings.send(wrapOutboundOut(context.channel.allocator.buffer(bytes: pong)), context: context)
            if sent { setup.counters.sent(bytes: pong.count) } else { setup.counters.dropped("pong_backlog") }
        case .health(let text):
            setup.delegate.health(text)
        case .restarting(let reconnectIn, let tryFor):
            restarting = (reconnectIn, tryFor)
            setup.delegate.restarting(reconnectIn: reconnectIn, tryFor: tryFor)
        case .other:
            setup.counters.dropped("unknown_frame")
        }
    }

    private func write(_ frame: DERPFrame, context: ChannelHandlerContext, flush: Bool) {
        let bytes = frame.encoded
        setup.counters.sent(bytes: bytes.count)
        context.write(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes)), promise: nil)
        if flush { context.flush() }
    }

    // MARK: Liveness and the end

    /// Fires `readTimeout` after the last frame; re-arms itself while frames keep coming.
    private func armLiveness(context: ChannelHandlerContext) {
        let deadline = lastFrame + setup.readTimeout
        livenessTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            if case .done = phase { return }
            if NIODeadline.now() >= lastFrame + setup.readTimeout {
                fail("no DERP frame for \(setup.readTimeout.nanoseconds / 1_000_000_000) s", context: context)
            } else {
                armLiveness(context: context)
            }
        }
    }

    private func fail(_ reason: String, context: ChannelHandlerContext) {
        if failure == nil { failure = reason }
        finish()
        context.close(promise: nil)
    }

    private func finish() {
        if case .done = phase { return }
        phase = .done
        livenessTimer?.cancel()
        livenessTimer = nil
        let reason = failure ?? "closed"
        setup.attempt.fail(.failed(reason))
        setup.ended.succeed(DERPConnectionEnd(error: reason, restarting: restarting))
    }
}
