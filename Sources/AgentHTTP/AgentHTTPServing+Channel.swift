import AgentCore
import Logging
import NIOCore

/// Where a module hands connections it received elsewhere: AgentCore's seam with its one way
/// in, a NIO channel (the tailnet's tunnel connections). The host implements it with the HTTP
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
}
