import NIOCore
import NIOTLS

/// The first handler of a connection to a proxy: runs the proxy's handshake (an HTTP proxy's
/// `CONNECT`, a SOCKS5 connect) once the connection is up. Until the way to the target is
/// open the handlers behind it see no `channelActive` (so a TLS handler starts its handshake
/// only with the target) and any write of theirs waits here, at most ``maxHeldBytes``. Once
/// it is open it passes `channelActive` on, then any bytes that came after the proxy's answer,
/// and removes itself; a refusal, a broken answer or the connection's end fails the
/// connection with a ``ProxyError`` (`errorCaught`, then close).
public final class ProxyHandshakeHandler<Handshake: ProxyHandshake>: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    /// Writes held before the way is open, in bytes; past it the connection fails.
    public static var maxHeldBytes: Int { 256 * 1024 }

    private enum State {
        case waitingForActive
        case waitingForAnswer
        case established
        case failed
    }

    private var handshake: Handshake
    private var proxy: ProxyServer { handshake.proxy }
    private var state = State.waitingForActive
    private var held: [(ByteBuffer, EventLoopPromise<Void>?)] = []
    private var heldBytes = 0
    private var flushHeld = false

    public init(_ handshake: Handshake) {
        self.handshake = handshake
    }

    public func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { sendConnect(context: context) }
    }

    /// Removed before the way was open (the pipeline went): held writes fail, not leak.
    public func handlerRemoved(context: ChannelHandlerContext) {
        for (_, promise) in takeHeld() { promise?.fail(ProxyError.closed(proxy: proxy)) }
    }

    public func channelActive(context: ChannelHandlerContext) {
        // Held back from the handlers behind this one until the way is open.
        sendConnect(context: context)
    }

    private func sendConnect(context: ChannelHandlerContext) {
        guard case .waitingForActive = state else { return }
        state = .waitingForAnswer
        send(handshake.opening(), context: context)
    }

    private func send(_ bytes: [UInt8], context: ChannelHandlerContext) {
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes)), promise: nil)
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch state {
        case .established:
            context.fireChannelRead(data)
        case .failed:
            return
        case .waitingForActive, .waitingForAnswer:
            var step = handshake.feed(unwrapInboundIn(data).readableBytesView)
            // Each exchange is sent in turn; the proxy's bytes may already hold the next answer.
            while case .send(let bytes) = step, state == .waitingForAnswer {
                send(bytes, context: context)
                step = handshake.feed(EmptyCollection())
            }
            // A failed write may have ended the connection meanwhile.
            guard state == .waitingForAnswer else { return }
            switch step {
            case .incomplete, .send:
                return
            case .established(let rest):
                established(rest: rest, context: context)
            case .failed(let error):
                fail(error, context: context)
            }
        }
    }

    /// An error before the way is open is the proxy's: an I/O error (a reset, say) or TLS's
    /// report of a close without `close_notify` is the proxy closing the connection; any other
    /// (TLS to an `https://` proxy refusing its certificate) is named as the proxy's.
    public func errorCaught(context: ChannelHandlerContext, error: any Error) {
        switch state {
        case .waitingForActive, .waitingForAnswer:
            fail(ProxyError.isClosing(error) ? ProxyError.closed(proxy: proxy) : ProxyError.failed(proxy: proxy, "\(error)"), context: context)
        case .established, .failed:
            context.fireErrorCaught(error)
        }
    }

    /// TLS's events of the connection to an `https://` proxy concern the proxy, not the
    /// target: the handlers behind see only their own.
    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is TLSUserEvent, state != .established { return }
        context.fireUserInboundEventTriggered(event)
    }

    public func channelInactive(context: ChannelHandlerContext) {
        switch state {
        case .established:
            context.fireChannelInactive()
        case .waitingForActive, .waitingForAnswer:
            fail(ProxyError.closed(proxy: proxy), context: context)
            context.fireChannelInactive()
        case .failed:
            context.fireChannelInactive()
        }
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch state {
        case .established:
            context.write(data, promise: promise)
        case .failed:
            promise?.fail(ChannelError.ioOnClosedChannel)
        case .waitingForActive, .waitingForAnswer:
            let buffer = unwrapOutboundIn(data)
            heldBytes += buffer.readableBytes
            held.append((buffer, promise))
            if heldBytes > Self.maxHeldBytes {
                fail(handshake.unanswered("no answer before \(Self.maxHeldBytes) bytes were waiting to be sent"), context: context)
            }
        }
    }

    public func flush(context: ChannelHandlerContext) {
        if case .established = state {
            context.flush()
        } else {
            flushHeld = true
        }
    }

    private func established(rest: [UInt8], context: ChannelHandlerContext) {
        state = .established
        let waiting = takeHeld()
        for (buffer, promise) in waiting { context.write(wrapOutboundOut(buffer), promise: promise) }
        if flushHeld || !waiting.isEmpty { context.flush() }
        context.fireChannelActive()
        if !rest.isEmpty { context.fireChannelRead(wrapInboundOut(context.channel.allocator.buffer(bytes: rest))) }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    private func fail(_ error: any Error, context: ChannelHandlerContext) {
        guard state != .failed else { return }
        state = .failed
        for (_, promise) in takeHeld() { promise?.fail(error) }
        context.fireErrorCaught(error)
        context.close(promise: nil)
    }

    /// The held writes, no longer held.
    private func takeHeld() -> [(ByteBuffer, EventLoopPromise<Void>?)] {
        defer {
            held = []
            heldBytes = 0
        }
        return held
    }
}
