import NIOCore
import NIOHTTP1

/// Writes each request's parts when its connection is ready: a new connection's first at
/// `channelActive`, which a proxy's handshake holds back until the way to the target is open
/// (TLS's handler holds the bytes until its handshake is done); a kept-alive connection's
/// next at once. A failed write means a failed connection, whose cause the answer's head
/// reports (``ResponseHeadHandler``).
final class RequestWriter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias InboundOut = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private var context: ChannelHandlerContext?
    private var ready = false
    private var parts: [HTTPClientRequestPart] = []

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    /// The next request's parts (on the loop): written now if the connection is ready.
    func begin(_ parts: [HTTPClientRequestPart]) {
        self.parts = parts
        if ready { write() }
    }

    func channelActive(context: ChannelHandlerContext) {
        ready = true
        write()
        context.fireChannelActive()
    }

    private func write() {
        guard !parts.isEmpty, let context else { return }
        for part in parts { context.write(wrapOutboundOut(part), promise: nil) }
        parts = []
        context.flush()
    }
}
