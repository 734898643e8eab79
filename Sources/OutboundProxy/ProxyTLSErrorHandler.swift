import NIOCore
import AgentTLS
import NIOTLS

/// Behind the TLS handler of a connection to an `https://` proxy that requests are forwarded
/// to (a plain http target: the proxy has no handshake of its own for
/// ``ProxyHandshakeHandler`` to run): an error before TLS with the proxy is up is the proxy's,
/// named as that handler names it. Once TLS is up it removes itself, and errors pass as they
/// are.
final class ProxyTLSErrorHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    private let proxy: ProxyServer

    init(proxy: ProxyServer) {
        self.proxy = proxy
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        let why = ProxyError.isClosing(error) ? "the connection closed before TLS with the proxy was up" : "\(error)"
        context.fireErrorCaught(ProxyError.failed(proxy: proxy, why))
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        context.fireUserInboundEventTriggered(event)
        if case TLSUserEvent.handshakeCompleted = event {
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        }
    }
}

extension ProxyError {
    /// Whether `error`, before the way to the target is open, is the proxy closing the
    /// connection: an I/O error (a reset, say), or TLS's report of a close without
    /// `close_notify`.
    static func isClosing(_ error: any Error) -> Bool {
        error is IOError || error is ChannelError || error as? TLSError == .uncleanShutdown
    }
}
