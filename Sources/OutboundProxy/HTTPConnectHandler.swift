import NIOCore

/// The first handler of a connection to an HTTP proxy: sends `CONNECT host:port` when the
/// connection is up and reads the proxy's answer (``ProxyConnectAnswer``). Until the tunnel is
/// established the handlers behind it see no `channelActive` (so a TLS handler starts its
/// handshake only inside the tunnel) and any write of theirs waits here, at most
/// ``maxHeldBytes``. Once the proxy answers 200 it passes `channelActive` on, then any bytes
/// that came after the answer, and removes itself; any other answer fails the connection with
/// a ``ProxyError`` (`errorCaught`, then close).
public final class HTTPConnectHandler: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    /// Writes held before the tunnel is up, in bytes; past it the connection fails.
    public static let maxHeldBytes = 256 * 1024

    private enum State {
        case waitingForActive
        case waitingForAnswer
        case established
        case failed
    }

    private let proxy: ProxyServer
    private let target: String
    private var state = State.waitingForActive
    private var answer = ProxyConnectAnswer()
    private var held: [(ByteBuffer, EventLoopPromise<Void>?)] = []
    private var heldBytes = 0
    private var flushHeld = false

    /// - Parameters:
    ///   - proxy: the HTTP proxy this connection goes to (its credentials, if any, are sent
    ///     as `Proxy-Authorization`).
    ///   - host: the target's host (a name, or an address without brackets).
    ///   - port: the target's port.
    public init(proxy: ProxyServer, host: String, port: Int) {
        self.proxy = proxy
        target = (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
    }

    public func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { sendConnect(context: context) }
    }

    /// Removed before the tunnel was up (the pipeline went): held writes fail, not leak.
    public func handlerRemoved(context: ChannelHandlerContext) {
        for (_, promise) in takeHeld() { promise?.fail(ProxyError.closed(proxy: proxy)) }
    }

    public func channelActive(context: ChannelHandlerContext) {
        // Held back from the handlers behind this one until the tunnel is up.
        sendConnect(context: context)
    }

    private func sendConnect(context: ChannelHandlerContext) {
        guard case .waitingForActive = state else { return }
        state = .waitingForAnswer
        var request = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n"
        if let authorization = proxy.authorization { request += "Proxy-Authorization: \(authorization)\r\n" }
        request += "\r\n"
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: request)), promise: nil)
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch state {
        case .established:
            context.fireChannelRead(data)
        case .failed:
            return
        case .waitingForActive, .waitingForAnswer:
            let buffer = unwrapInboundIn(data)
            switch answer.feed(buffer.readableBytesView) {
            case .incomplete:
                return
            case .established(let rest):
                established(rest: rest, context: context)
            case .refused(let status, let reason):
                fail(.refused(proxy: proxy, target: target, status: status, reason: reason), context: context)
            case .malformed(let why):
                fail(.malformedAnswer(proxy: proxy, why), context: context)
            }
        }
    }

    public func channelInactive(context: ChannelHandlerContext) {
        switch state {
        case .established:
            context.fireChannelInactive()
        case .waitingForActive, .waitingForAnswer:
            fail(.closed(proxy: proxy), context: context)
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
                fail(.malformedAnswer(proxy: proxy, "no answer before \(Self.maxHeldBytes) bytes were waiting to be sent"), context: context)
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

    private func fail(_ error: ProxyError, context: ChannelHandlerContext) {
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
