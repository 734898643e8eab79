import NIOCore
import NIOTLS

/// TLS on a channel, over OpenSSL (``TLSSession``): ciphertext below, plaintext above.
///
/// A client starts its handshake when the channel is active (or when added to an active
/// channel); plaintext written before the handshake completes is held, at most
/// ``maxHeldPlaintext`` bytes, and leaves in order behind it. When the handshake completes,
/// the client's `verifyPeer` check runs on the leaf's names before anything is written, then
/// `TLSUserEvent.handshakeCompleted` goes up with the ALPN protocol. The peer's close_notify
/// is answered with ours and the channel closed; a connection that ends without it raises
/// ``TLSError/uncleanShutdown`` (an answer cut short is told from a complete one so). Closing
/// the channel sends close_notify first, as Go's `tls.Conn.Close` does, without waiting for
/// the peer's. A failure raises its ``TLSError`` (after an alert to the peer, when OpenSSL
/// made one) and closes the channel.
///
/// Memory: OpenSSL holds at most one partial record of input (16 KiB and its overhead) past
/// each read, which is decrypted as it arrives; the output of each write leaves with it.
public final class TLSHandler: ChannelDuplexHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    /// A check of the peer leaf's names once the chain has been verified: an error refuses
    /// the connection. Given nil when the peer sent no certificate.
    public typealias PeerCheck = @Sendable ([SubjectAlternativeName]?) -> (any Error)?

    /// Plaintext held for the handshake at most (a request's head is what callers write).
    public static let maxHeldPlaintext = 1 << 20

    private enum State {
        /// Not started: the channel is not active yet.
        case idle
        case handshaking
        case active
        /// Our close_notify is queued; nothing more is written.
        case closing
        /// Ended: the channel closed, or TLS failed.
        case closed
    }

    private let session: TLSSession
    private let verifyPeer: PeerCheck?
    private var state = State.idle
    private var held: [(ByteBuffer, EventLoopPromise<Void>?)] = []
    private var heldBytes = 0

    /// A client: SNI `serverName` (nil: none, as for an address), and `verifyPeer` run on the
    /// leaf's names after OpenSSL verified its chain (when the context verifies).
    public init(client context: TLSContext, serverName: String?, verifyPeer: PeerCheck? = nil) throws(TLSError) {
        session = try TLSSession(context: context, server: false, serverName: serverName)
        self.verifyPeer = verifyPeer
    }

    /// A server with the context's certificate.
    public init(server context: TLSContext) throws(TLSError) {
        session = try TLSSession(context: context, server: true, serverName: nil)
        verifyPeer = nil
    }

    public func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context: context) }
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        failHeld(ChannelError.ioOnClosedChannel)
    }

    public func channelActive(context: ChannelHandlerContext) {
        start(context: context)
        context.fireChannelActive()
    }

    public func channelInactive(context: ChannelHandlerContext) {
        let before = state
        state = .closed
        failHeld(ChannelError.ioOnClosedChannel)
        // The peer's close_notify moves the state to closed first, so an end seen here
        // while handshaking or active came without it.
        if before == .handshaking || before == .active {
            context.fireErrorCaught(TLSError.uncleanShutdown)
        }
        context.fireChannelInactive()
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let ciphertext = unwrapInboundIn(data)
        if state == .idle { start(context: context) }
        guard state == .handshaking || state == .active || state == .closing else { return }
        guard ciphertext.withUnsafeReadableBytes({ session.feed($0) }) else {
            fail(context: context, .failed("no memory for the peer's records"))
            return
        }
        if state == .handshaking {
            advanceHandshake(context: context)
            guard state == .active else { return }
        }
        readPlaintext(context: context, expected: ciphertext.readableBytes)
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let plaintext = unwrapOutboundIn(data)
        switch state {
        case .idle, .handshaking:
            guard heldBytes + plaintext.readableBytes <= Self.maxHeldPlaintext else {
                promise?.fail(TLSError.tooMuchBeforeHandshake(limit: Self.maxHeldPlaintext))
                return
            }
            heldBytes += plaintext.readableBytes
            held.append((plaintext, promise))
        case .active:
            encrypt(context: context, plaintext, promise: promise)
        case .closing, .closed:
            promise?.fail(ChannelError.ioOnClosedChannel)
        }
    }

    public func flush(context: ChannelHandlerContext) {
        switch state {
        case .idle, .handshaking: break  // the held writes leave, flushed, when the handshake completes
        case .active, .closing, .closed: context.flush()
        }
    }

    public func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode != .input, state == .active {
            state = mode == .all ? .closed : .closing
            if session.close() { writeOutput(context: context, flush: true) }
        } else if mode == .all {
            state = .closed
        }
        if mode == .all { failHeld(ChannelError.ioOnClosedChannel) }
        context.close(mode: mode, promise: promise)
    }

    // MARK: Steps

    private func start(context: ChannelHandlerContext) {
        guard state == .idle else { return }
        state = .handshaking
        advanceHandshake(context: context)
    }

    private func advanceHandshake(context: ChannelHandlerContext) {
        switch session.handshake() {
        case .wantRead:
            writeOutput(context: context, flush: true)
        case .closed:
            fail(context: context, .handshakeFailed("the peer closed the connection"))
        case .failed(let reason):
            fail(context: context, .handshakeFailed(reason))
        case .done:
            if let verifyPeer, let error = verifyPeer(session.peerNames) {
                state = .closed
                failHeld(error)
                context.fireErrorCaught(error)
                context.close(promise: nil)
                return
            }
            state = .active
            writeOutput(context: context, flush: false)
            // The held writes first, so that what the event's handler writes comes after them.
            let writes = held
            held = []
            heldBytes = 0
            for (plaintext, promise) in writes {
                if state == .active { encrypt(context: context, plaintext, promise: promise) } else { promise?.fail(ChannelError.ioOnClosedChannel) }
            }
            context.flush()
            context.fireUserInboundEventTriggered(TLSUserEvent.handshakeCompleted(negotiatedProtocol: session.negotiatedProtocol))
        }
    }

    /// Decrypts what the session holds and passes it up as one read.
    private func readPlaintext(context: ChannelHandlerContext, expected: Int) {
        // Records carry at least 22 bytes of overhead, so what a read brings fits unless a
        // record it ends was begun by the read before.
        var plaintext = context.channel.allocator.buffer(capacity: expected + 1024)
        var ending: TLSSession.Step = .wantRead
        // Each turn takes a record's worth of input, so the loop ends when the input does.
        while true {
            var step = TLSSession.Step.done
            plaintext.writeWithUnsafeMutableBytes(minimumWritableBytes: 4096) { buffer in
                let (count, result) = session.read(into: buffer)
                step = result
                return count
            }
            if step != .done {
                ending = step
                break
            }
        }
        if plaintext.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(plaintext)) }
        switch ending {
        case .failed(let reason):
            fail(context: context, .failed(reason))
        case .closed:
            let answer = state == .active
            state = .closed
            if answer, session.close() { writeOutput(context: context, flush: true) }
            context.close(promise: nil)
        case .wantRead, .done:
            // A post-handshake message (a key update) may want an answer.
            if session.pendingOutput > 0 { writeOutput(context: context, flush: true) }
        }
    }

    private func encrypt(context: ChannelHandlerContext, _ plaintext: ByteBuffer, promise: EventLoopPromise<Void>?) {
        if case .failed(let reason) = plaintext.withUnsafeReadableBytes({ session.write($0) }) {
            promise?.fail(TLSError.failed(reason))
            fail(context: context, .failed(reason))
            return
        }
        guard let ciphertext = takeOutput(context: context) else {
            promise?.succeed()
            return
        }
        context.write(wrapOutboundOut(ciphertext), promise: promise)
    }

    private func takeOutput(context: ChannelHandlerContext) -> ByteBuffer? {
        let pending = session.pendingOutput
        guard pending > 0 else { return nil }
        var buffer = context.channel.allocator.buffer(capacity: pending)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: pending) { session.takeOutput(into: $0) }
        return buffer
    }

    /// Sends what the session queued for the peer (handshake flights, alerts, close_notify).
    private func writeOutput(context: ChannelHandlerContext, flush: Bool) {
        guard let ciphertext = takeOutput(context: context) else { return }
        context.write(wrapOutboundOut(ciphertext), promise: nil)
        if flush { context.flush() }
    }

    private func fail(context: ChannelHandlerContext, _ error: TLSError) {
        state = .closed
        failHeld(error)
        writeOutput(context: context, flush: true)
        context.fireErrorCaught(error)
        context.close(promise: nil)
    }

    private func failHeld(_ error: any Error) {
        let writes = held
        held = []
        heldBytes = 0
        for (_, promise) in writes { promise?.fail(error) }
    }
}

@available(*, unavailable)
extension TLSHandler: Sendable {}
