import AgentCore
import AgentHTTP
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

/// The host's ``ChannelAcceptor`` (``AgentHost/connections``): connections modules hand over
/// (the tailnet's channels) served by the HTTP API's ``AgentHTTPServing``
/// while the `serving` phase runs, and refused (closed) before and after.
///
/// Memory: one entry per connection being served, which the HTTP registry's cap bounds (a
/// connection beyond it is closed at once).
final class HostConnections: ChannelAcceptor, Sendable {
    private enum Phase {
        case idle
        case running(AgentHTTPServing)
        case stopped
    }

    private struct State {
        var phase = Phase.idle
        var open: [ObjectIdentifier: any Channel] = [:]
    }

    private let state = Mutex(State())

    func serve(_ channel: any Channel, listener: String, remote: String?) -> EventLoopFuture<Void> {
        let id = ObjectIdentifier(channel)
        // Checked and recorded under one lock: once `run` has listed the open connections
        // (the phase `stopped`), none is added.
        let serving = state.withLock { s -> AgentHTTPServing? in
            guard case .running(let serving) = s.phase else { return nil }
            s.open[id] = channel
            return serving
        }
        guard let serving else { return channel.eventLoop.makeFailedFuture(ConnectionHandOverError(.notServing)) }
        channel.closeFuture.whenComplete { [self] _ in
            _ = state.withLock { $0.open.removeValue(forKey: id) }
        }
        return serving.serve(channel, listener: listener, remote: remote)
    }

    /// Serves with `serving` until graceful shutdown (the `serving` phase), then refuses new
    /// connections, asks open ones to finish their exchange and close (as the listener's
    /// are quiesced), and returns once they closed (the registry closes what is left at the
    /// shutdown bound). Cancellation closes them at once.
    func run(serving: AgentHTTPServing) async {
        state.withLock { s in
            if case .idle = s.phase { s.phase = .running(serving) }
        }
        try? await gracefulShutdown()
        let open = state.withLock { s -> [any Channel] in
            s.phase = .stopped
            return Array(s.open.values)
        }
        for channel in open { channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent()) }
        // Bounded: every connection closes by the shutdown bound (the registry's closeAll).
        // A future's wait ignores cancellation (no spinning); cancellation, before or during
        // the wait, closes them.
        await withTaskCancellationHandler {
            for channel in open { try? await channel.closeFuture.get() }
        } onCancel: {
            for channel in open { channel.close(promise: nil) }
        }
    }
}

/// Serves the connections modules hand over (``AgentHost/connections``) with the HTTP API's
/// routes until graceful shutdown reaches the `serving` phase and they have closed.
struct HandedOverService: Service, CustomStringConvertible {
    let connections: HostConnections
    let serving: AgentHTTPServing

    var description: String { "HandedOverService" }

    func run() async throws {
        await connections.run(serving: serving)
    }
}
