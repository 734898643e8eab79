import AgentCore
import Logging
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// Where a module hands connections it received elsewhere: AgentCore's descriptor seam plus
/// NIO channels (the tailnet's tunnel connections). The host implements it with the HTTP
/// API's ``AgentHTTPServing``; a module reaches it as `context.connections as? any
/// ChannelAcceptor`.
public protocol ChannelAcceptor: ConnectionAcceptor {
    /// Serves `channel` (on its event loop, not active yet) as the HTTP API serves what its
    /// listener accepts; the future completes once the pipeline is set up (it fails, and
    /// the channel should be closed, when the connection is not served).
    func serve(_ channel: any Channel, listener: String, remote: String?) -> EventLoopFuture<Void>
}

extension AgentHTTPServing {
    /// Serves `channel`, a connection this server did not accept (a tunnel connection), by
    /// the same pipeline set-up as a listener's connection: every route, the same guards,
    /// deadlines and connection cap (admitted into ``connections``, so the shutdown drains
    /// and closes it with the others), counted in
    /// `agent_http_connections_handed_over_total{listener}`. Each request's context names
    /// `listener` and `remote`. Call on the channel's event loop, before it is active; the
    /// future completes when the pipeline is ready.
    public func serve(_ channel: any Channel, listener: String, remote: String?) -> EventLoopFuture<Void> {
        guard ListenerName.isValid(listener) else {
            HTTPMetrics.handOverRefused(.invalidListenerName)
            return channel.eventLoop.makeFailedFuture(ConnectionHandOverError(.invalidListenerName))
        }
        let child = childChannel.from(ConnectionOrigin(listener: listener, remote: ListenerName.boundedRemote(remote)))
        let logger = self.logger
        return child.setup(channel: channel, logger: logger).map { value in
            HTTPMetrics.handedOver(listener)
            Task { await child.handle(value: value, logger: logger) }
        }
    }

    /// Serves a connected stream socket (AgentCore's ``ConnectionAcceptor`` seam): NIO adopts
    /// it on `group`, then `acceptor` (else ``serve(_:listener:remote:)``) serves the channel.
    /// Never blocks; the descriptor is owned from this call on (closed when refused).
    public func serve(
        descriptor: CInt, listener: String, remote: String?, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        through acceptor: (any ChannelAcceptor)? = nil
    ) throws(ConnectionHandOverError) {
        var refusal: ConnectionHandOverError?
        if !ListenerName.isValid(listener) {
            refusal = ConnectionHandOverError(.invalidListenerName)
        } else if let code = Self.prepareStreamSocket(descriptor) {
            refusal = ConnectionHandOverError(.notAStreamSocket(errno: code))
        }
        if let refusal {
            close(descriptor)
            HTTPMetrics.handOverRefused(refusal.reason)
            throw refusal
        }
        let logger = self.logger
        ClientBootstrap(group: group)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .channelInitializer { [self] channel in
                acceptor?.serve(channel, listener: listener, remote: remote) ?? serve(channel, listener: listener, remote: remote)
            }
            .withConnectedSocket(descriptor)
            .whenFailure { error in
                logger.info("could not serve a handed-over connection", metadata: ["listener": "\(listener)", "error": "\(error)"])
            }
    }

    /// Checks that `descriptor` is a stream socket and makes it non-blocking (what NIO will
    /// need); nil when it is fit, else the errno of the check that failed (ENOTSOCK: not a
    /// socket, EBADF: not open; 0: a socket of another type).
    static func prepareStreamSocket(_ descriptor: CInt) -> Int32? {
        var type: CInt = 0
        var length = socklen_t(MemoryLayout<CInt>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_TYPE, &type, &length) == 0 else { return errno }
        guard type == CInt(SOCK_STREAM.rawValue) else { return 0 }
        let flags = fcntl(descriptor, F_GETFL)
        guard flags >= 0, fcntl(descriptor, F_SETFL, flags | O_NONBLOCK) == 0 else { return errno }
        return nil
    }
}
