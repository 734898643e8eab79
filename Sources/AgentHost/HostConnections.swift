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
    private let allClosed = WorkSignal()

    private var serving: AgentHTTPServing? {
        state.withLock { s in
            if case .running(let serving) = s.phase { return serving }
            return nil
        }
    }

    func serve(_ channel: any Channel, listener: String, remote: String?) -> EventLoopFuture<Void> {
        guard let serving else { return channel.eventLoop.makeFailedFuture(ConnectionHandOverError(.notServing)) }
        let id = ObjectIdentifier(channel)
        state.withLock { $0.open[id] = channel }
        channel.closeFuture.whenComplete { [self] _ in
            let empty = state.withLock { s in
                s.open[id] = nil
                return s.open.isEmpty
            }
            if empty { allClosed.notify() }
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
        if Task.isCancelled {
            for channel in open { channel.close(promise: nil) }
        }
        // Bounded: every connection closes by the shutdown bound (the registry's closeAll).
        while !state.withLock({ $0.open.isEmpty }) {
            await allClosed.wait()
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
