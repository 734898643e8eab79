import NIOCore
import NIOSOCKS
import NIOSSL
import NIOTLS

/// Owns a request's connect timeout, on the event loop: the connection closes at it unless it
/// is ready by then, and no timer outlives the connection. Ready means TLS's
/// handshake done for https; for plain http the SOCKS5 proxy's connect, or the connection's
/// `channelActive` (which a `CONNECT` tunnel holds back until it is up). Behind a SOCKS5
/// proxy it also turns NIO's SOCKS errors, and the proxy closing before it connected, into
/// ``ProxyError``s that name the proxy and the target. Sits behind the route's and TLS's
/// handlers.
final class ConnectionSetupHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// What makes the connection ready.
    enum Signal {
        case active
        case socks
        case tls
    }

    private let signal: Signal
    private let socks: (proxy: ProxyServer, target: String)?
    private let deadline: NIODeadline
    private let expired: @Sendable () -> Void
    private var timer = ChannelDeadline()
    private var socksUp = false

    /// - Parameters:
    ///   - tls: whether TLS runs on the connection.
    ///   - route: the request's route; `host` and `port` its target.
    ///   - deadline: when the connection closes unless it is ready, `expired` called first.
    init(tls: Bool, route: ProxyRoute, host: String, port: Int, deadline: NIODeadline, expired: @escaping @Sendable () -> Void) {
        var socks: (proxy: ProxyServer, target: String)?
        if case .socks(let proxy) = route { socks = (proxy, (host.contains(":") ? "[\(host)]" : host) + ":\(port)") }
        self.socks = socks
        signal = tls ? .tls : socks != nil ? .socks : .active
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
        if signal == .active { ready() }
        context.fireChannelActive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is SOCKSProxyEstablishedEvent {
            socksUp = true
            if signal == .socks { ready() }
        }
        if let tls = event as? TLSUserEvent, case .handshakeCompleted = tls, signal == .tls { ready() }
        context.fireUserInboundEventTriggered(event)
    }

    /// Before a SOCKS5 proxy has connected, every error is the proxy's: its refusal, or its
    /// connection ending (which TLS's handler, in front of this one, reports as a failed
    /// handshake).
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let socks, !socksUp else { return context.fireErrorCaught(error) }
        context.fireErrorCaught(Self.proxyError(error, proxy: socks.proxy, target: socks.target))
    }

    func channelInactive(context: ChannelHandlerContext) {
        ready()
        if let socks, !socksUp { context.fireErrorCaught(ProxyError.closed(proxy: socks.proxy)) }
        context.fireChannelInactive()
    }

    /// A SOCKS5 refusal (RFC 1928's reply codes, in Go's words), a protocol error of the
    /// proxy's, or the proxy's connection ending before it connected (an I/O error, or TLS's
    /// handshake cut); any other error as it is.
    static func proxyError(_ error: any Error, proxy: ProxyServer, target: String) -> any Error {
        if let failed = error as? SOCKSError.ConnectionFailed {
            return ProxyError.socksRefused(proxy: proxy, target: target, reason: replyText(failed.reply.value))
        }
        switch error {
        case is SOCKSError.InvalidProtocolVersion, is SOCKSError.InvalidReservedByte, is SOCKSError.InvalidAddressType,
            is SOCKSError.InvalidAuthenticationSelection, is SOCKSError.NoValidAuthenticationMethod, is SOCKSError.UnexpectedRead,
            is SOCKSError.InvalidServerState, is SOCKSError.InvalidClientState:
            return ProxyError.socksFailed(proxy: proxy, target: target, reason: "\(error)")
        case is IOError, is ChannelError, NIOSSLError.uncleanShutdown, CheckedHTTPError.incompleteAnswer:
            return ProxyError.closed(proxy: proxy)
        case let tls as NIOSSLError:
            // The connection ended during TLS's handshake, which waits for the proxy's connect.
            if case .handshakeFailed = tls { return ProxyError.closed(proxy: proxy) }
            return error
        default:
            return error
        }
    }

    /// RFC 1928's reply codes, as Go's SOCKS client words them.
    static func replyText(_ code: UInt8) -> String {
        switch code {
        case 1: "general SOCKS server failure"
        case 2: "connection not allowed by ruleset"
        case 3: "network unreachable"
        case 4: "host unreachable"
        case 5: "connection refused"
        case 6: "TTL expired"
        case 7: "command not supported"
        case 8: "address type not supported"
        default: "unknown code: \(code)"
        }
    }
}
