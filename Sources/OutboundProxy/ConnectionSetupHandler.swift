import NIOCore
import NIOTLS

/// Owns a request's connect timeout, on the event loop: the connection closes at it unless it
/// is ready by then, and no timer outlives the connection. Ready means TLS's handshake done
/// for https (the target's: a tunnel's proxy keeps its own TLS events), or for plain http
/// forwarded to an `https://` proxy, the proxy's; else the connection's `channelActive`,
/// which a proxy's handshake (``ProxyHandshakeHandler``) holds back until the way to the
/// target is open. Sits behind the route's and TLS's handlers.
final class ConnectionSetupHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let tls: Bool
    private let deadline: NIODeadline
    private let expired: @Sendable () -> Void
    private var timer = ChannelDeadline()

    /// - Parameters:
    ///   - tls: whether TLS runs on the connection.
    ///   - deadline: when the connection closes unless it is ready, `expired` called first.
    init(tls: Bool, deadline: NIODeadline, expired: @escaping @Sendable () -> Void) {
        self.tls = tls
        self.deadline = deadline
        self.expired = expired
    }

    func handlerAdded(context: ChannelHandlerContext) {
        timer.start(context, at: deadline, expired: expired)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        ready()
    }

    /// The connect timeout no longer applies.
    private func ready() {
        timer.stop()
    }

    func channelActive(context: ChannelHandlerContext) {
        if !tls { ready() }
        context.fireChannelActive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if tls, let event = event as? TLSUserEvent, case .handshakeCompleted = event { ready() }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        ready()
        context.fireChannelInactive()
    }
}
