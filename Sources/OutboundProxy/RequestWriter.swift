import NIOCore
import NIOHTTP1

/// Writes a request's parts when its connection is ready: at `channelActive`, which a proxy's
/// handshake holds back until the way to the target is open; TLS's handler holds the bytes
/// until its handshake is done. A failed write means a failed connection, whose cause the
/// answer's head reports (``ResponseHeadHandler``).
final class RequestWriter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias InboundOut = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private var parts: [HTTPClientRequestPart]

    init(parts: [HTTPClientRequestPart]) {
        self.parts = parts
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { write(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        write(context)
        context.fireChannelActive()
    }

    private func write(_ context: ChannelHandlerContext) {
        guard !parts.isEmpty else { return }
        for part in parts { context.write(wrapOutboundOut(part), promise: nil) }
        parts = []
        context.flush()
    }
}
