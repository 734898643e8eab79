import AgentCore
import CoreMetrics
import NIOCore
import Synchronization

/// Every open connection of one HTTP server, so that none can hold the agent up.
///
/// - At most ``maxConnections`` plain connections (HTTP requests, handshakes in progress)
///   are open. A new connection beyond that closes the connection that has waited longest
///   for a request head (one closing after a refusal first, then idle keep-alive or
///   half-sent heads); if every connection is busy (a request in progress), the new one is
///   refused. So `/healthz` keeps answering while a local user holds thousands of idle or
///   half-open connections.
/// - WebSockets (long-lived streams) count against their own budget, ``maxWebSockets``,
///   and not against ``maxConnections``: a handshake beyond it is refused (503 with a JSON
///   error), and however many streams are open, plain requests keep the whole connection
///   cap.
/// - ``stopAccepting()`` begins the agent's shutdown: new connections are answered 503 and
///   closed, idle ones are closed, and busy ones close when their exchange ends.
/// - ``closeAll()`` ends every connection (the last step of the agent's shutdown bound).
///
/// The HTTP face of AgentCore's ``ConnectionRegistry`` (which the agent socket and the
/// boundary socket use too): channels, request phases and WebSockets in its terms, and the
/// HTTP metrics. Memory: one small entry per open connection, at most ``maxConnections``
/// plus ``maxWebSockets``.
public final class HTTPConnectionRegistry: Sendable {
    /// What a connection is doing, which decides whether it may be evicted.
    enum Phase: Sendable {
        /// Waiting for (the rest of) a request head since this time: evictable.
        case awaitingHead(since: NIODeadline)
        /// A request is being read or answered.
        case busy
        /// Upgraded to a WebSocket.
        case webSocket
    }

    /// One connection's phase, written by its event loop on every request without the
    /// registry's lock (two lock round trips per request on a lock every loop shares,
    /// measured in `agent-bench http`); read under the lock when evicting or draining.
    typealias PhaseCell = ConnectionRegistry.Connection

    /// What ``admit(_:)`` decided.
    enum Admission {
        case admitted(UInt64, PhaseCell)
        /// Over the cap with every connection busy, or after ``closeAll()``: close at once.
        case refused
        /// The agent is shutting down: answer 503, then close.
        case draining
    }

    /// The shared registry this one speaks HTTP for.
    let core: ConnectionRegistry

    /// The cap on open plain connections (WebSockets not included).
    public var maxConnections: Int { core.maxConnections }
    /// The cap on WebSockets, a budget of their own beside ``maxConnections``.
    public var maxWebSockets: Int { core.maxStreams }

    public init(
        maxConnections: Int = AgentHTTPLimits.maxConnections, maxWebSockets: Int = AgentHTTPLimits.maxWebSockets,
        burstSize: Int = HTTPConnectionRegistry.defaultBurstSize,
        releaseMemory: @escaping @Sendable () -> Void = { FreeMemory.releaseSoon() }
    ) {
        let observer = ConnectionRegistry.Observer(
            open: { HTTPMetrics.connections.record($0) },
            evicted: { HTTPMetrics.evicted.increment() },
            refused: { HTTPMetrics.refused.increment() },
            streams: { HTTPMetrics.webSockets.record($0) },
            streamRefused: { HTTPMetrics.webSocketsRefused.increment() })
        core = ConnectionRegistry(
            maxConnections: maxConnections, maxStreams: maxWebSockets, whenAllBusy: .refuse, observer: observer,
            burstSize: burstSize, releaseMemory: releaseMemory)
    }

    /// Takes a WebSocket slot for a handshake about to be accepted; false (counted) when
    /// the WebSockets' budget is used up. Given back with ``releaseWebSocket()``.
    func reserveWebSocket() -> Bool { core.reserveStream() }

    func releaseWebSocket() { core.releaseStream() }

    /// WebSocket slots held now, and handshakes refused for want of one.
    public var webSocketCounters: (open: Int, refused: Int) { core.streamCounters }

    /// Registers a new connection, or says why it must not be served. Beyond the cap, the
    /// connection that has waited longest for a request head is closed (one closing after a
    /// refusal first); if every connection is busy, the new one is refused.
    func admit(_ channel: any Channel) -> Admission {
        switch core.register(close: { channel.close(promise: nil) }) {
        case .admitted(let connection, _): return .admitted(connection.id, connection)
        case .refused: return .refused
        case .draining: return .draining
        }
    }

    /// Records what a connection does; while draining, one that goes back to waiting for a
    /// request head (its exchange is over) is to be closed instead. Lock-free unless
    /// draining or upgrading. Returns true when the connection must close (the caller
    /// closes it once its answer is written: a response's parts may still wait for their
    /// flush).
    func setPhase(_ id: UInt64, _ cell: PhaseCell, _ phase: Phase) -> Bool {
        core.setPhase(cell, ConnectionRegistry.Phase(phase))
    }

    /// Stops taking requests (the first step of the agent's shutdown): new connections are
    /// answered 503 and closed, connections waiting for a request are closed, and the others
    /// are closed when their exchange ends. WebSockets stay until their handlers end.
    public func stopAccepting() { core.stopAccepting() }

    /// A burst of connections (plain and WebSockets together): at least this many were
    /// open. When a quarter of them is left the heap is trimmed (``FreeMemory``), and again
    /// at each further quarter until at most a sixteenth of this is left, so the last trim
    /// comes after nearly all of the burst's buffers were freed: 3072 WebSockets and 500
    /// idle connections otherwise left about 57 MiB of free heap resident.
    public static let defaultBurstSize = 256

    func remove(_ id: UInt64) { core.remove(id) }

    /// Closes every connection and refuses new ones.
    public func closeAll() { core.closeAll() }

    /// Open connections, WebSockets included.
    public var count: Int { core.count }

    /// Open connections with a request being read or answered.
    public var busyCount: Int { core.busyCount }

    /// Connections closed to make room for new ones, and connections refused because all
    /// were busy.
    public var counters: (evicted: Int, refused: Int) { core.counters }
}

extension ConnectionRegistry.Phase {
    init(_ phase: HTTPConnectionRegistry.Phase) {
        switch phase {
        case .awaitingHead(let since): self = .idle(since: since.uptimeNanoseconds)
        // HTTP refuses rather than close a busy connection, so its time is never read (and
        // the clock is not read twice per request).
        case .busy: self = .busy(since: 0)
        case .webSocket: self = .stream
        }
    }
}

extension ConnectionRegistry.Connection {
    /// Stores an HTTP phase without the registry's bookkeeping (a refusing connection marks
    /// itself the first to evict).
    func store(_ phase: HTTPConnectionRegistry.Phase) { store(ConnectionRegistry.Phase(phase)) }
}
