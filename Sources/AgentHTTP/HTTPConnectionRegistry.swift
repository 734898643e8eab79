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
/// Memory: one small entry per open connection, at most ``maxConnections`` plus
/// ``maxWebSockets``.
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
    final class PhaseCell: Sendable {
        /// -1 busy, -2 WebSocket, otherwise awaiting a head since this uptime (ns).
        private let raw: Atomic<Int64>

        init(_ phase: Phase) { raw = Atomic(Self.encode(phase)) }

        var phase: Phase {
            switch raw.load(ordering: .sequentiallyConsistent) {
            case -1: return .busy
            case -2: return .webSocket
            case let since: return .awaitingHead(since: NIODeadline.uptimeNanoseconds(UInt64(since)))
            }
        }

        func store(_ phase: Phase) { raw.store(Self.encode(phase), ordering: .sequentiallyConsistent) }

        private static func encode(_ phase: Phase) -> Int64 {
            switch phase {
            case .busy: return -1
            case .webSocket: return -2
            case .awaitingHead(let since): return Int64(clamping: since.uptimeNanoseconds)
            }
        }
    }

    private struct Entry {
        var channel: any Channel
        var phase: PhaseCell
    }

    private struct State {
        /// Plain connections: what ``maxConnections`` counts.
        var entries: [UInt64: Entry] = [:]
        /// Upgraded connections, counted by ``maxWebSockets`` instead.
        var streams: [UInt64: Entry] = [:]
        var nextID: UInt64 = 1
        var evicted = 0
        var refused = 0
        var closedAll = false
        var draining = false
        /// WebSocket slots held (handshakes admitted and upgraded connections).
        var webSockets = 0
        var webSocketsRefused = 0
        /// Most connections open since the heap was last trimmed.
        var peak = 0
        /// A burst is closing: trims are asked for at each further quarter of the peak.
        var burstClosing = false
    }

    /// What ``admit(_:)`` decided.
    enum Admission {
        case admitted(UInt64, PhaseCell)
        /// Over the cap with every connection busy, or after ``closeAll()``: close at once.
        case refused
        /// The agent is shutting down: answer 503, then close.
        case draining
    }

    /// The cap on open plain connections (WebSockets not included).
    public let maxConnections: Int
    /// The cap on WebSockets, a budget of their own beside ``maxConnections``.
    public let maxWebSockets: Int
    /// Connections (of both kinds) that make a burst worth giving memory back after.
    let burstSize: Int
    /// Gives the free heap back to the OS (``FreeMemory/releaseSoon(after:)``); called
    /// outside the lock.
    private let releaseMemory: @Sendable () -> Void
    private let state = Mutex(State())
    /// Mirrors `State.draining` for ``setPhase(_:_:)``'s lock-free path.
    private let draining = Atomic(false)

    public init(
        maxConnections: Int = AgentHTTPLimits.maxConnections, maxWebSockets: Int = AgentHTTPLimits.maxWebSockets,
        burstSize: Int = HTTPConnectionRegistry.defaultBurstSize,
        releaseMemory: @escaping @Sendable () -> Void = { FreeMemory.releaseSoon() }
    ) {
        self.maxConnections = maxConnections
        self.maxWebSockets = maxWebSockets
        self.burstSize = burstSize
        self.releaseMemory = releaseMemory
    }

    /// Takes a WebSocket slot for a handshake about to be accepted; false (counted) when
    /// the WebSockets' budget is used up. Given back with ``releaseWebSocket()``.
    func reserveWebSocket() -> Bool {
        state.withLock { s in
            guard s.webSockets < maxWebSockets else {
                s.webSocketsRefused += 1
                HTTPMetrics.webSocketsRefused.increment()
                return false
            }
            s.webSockets += 1
            HTTPMetrics.webSockets.record(s.webSockets)
            return true
        }
    }

    func releaseWebSocket() {
        state.withLock { s in
            s.webSockets -= 1
            HTTPMetrics.webSockets.record(s.webSockets)
        }
    }

    /// WebSocket slots held now, and handshakes refused for want of one.
    public var webSocketCounters: (open: Int, refused: Int) { state.withLock { ($0.webSockets, $0.webSocketsRefused) } }

    /// Registers a new connection, or says why it must not be served.
    func admit(_ channel: any Channel) -> Admission {
        let (admission, victim) = state.withLock { s -> (Admission, (any Channel)?) in
            if s.closedAll {
                s.refused += 1
                HTTPMetrics.refused.increment()
                return (.refused, nil)
            }
            if s.draining {
                s.refused += 1
                HTTPMetrics.refused.increment()
                return (.draining, nil)
            }
            var victim: (any Channel)?
            if s.entries.count >= maxConnections {
                // Linear in the number of connections, and only when full.
                var oldest: (UInt64, NIODeadline)?
                for (id, entry) in s.entries {
                    if case .awaitingHead(let since) = entry.phase.phase, oldest == nil || since < oldest!.1 {
                        oldest = (id, since)
                    }
                }
                guard let (victimID, _) = oldest else {
                    s.refused += 1
                    HTTPMetrics.refused.increment()
                    return (.refused, nil)
                }
                victim = s.entries.removeValue(forKey: victimID)?.channel
                s.evicted += 1
                HTTPMetrics.evicted.increment()
            }
            let id = s.nextID
            s.nextID += 1
            let cell = PhaseCell(.awaitingHead(since: .now()))
            s.entries[id] = Entry(channel: channel, phase: cell)
            s.peak = max(s.peak, s.entries.count + s.streams.count)
            HTTPMetrics.connections.record(s.entries.count + s.streams.count)
            return (.admitted(id, cell), victim)
        }
        victim?.close(promise: nil)
        return admission
    }

    /// Records what a connection does; while draining, one that goes back to waiting for a
    /// request head (its exchange is over) is to be closed instead.
    ///
    /// Lock-free unless draining. `draining` is set before the drain scans the phases and
    /// read here after the phase is stored (both sequentially consistent), so a connection
    /// going idle during a drain is closed by the scan, by this call, or by both (closing
    /// twice is harmless).
    /// Returns true when the connection must close (the caller closes it once its answer
    /// is written: a response's parts may still wait for their flush).
    func setPhase(_ id: UInt64, _ cell: PhaseCell, _ phase: Phase) -> Bool {
        cell.store(phase)
        if case .webSocket = phase {
            // Once per WebSocket: it leaves the connection cap for the stream budget.
            state.withLock { s in
                if let entry = s.entries.removeValue(forKey: id) { s.streams[id] = entry }
            }
            return false
        }
        guard case .awaitingHead = phase, draining.load(ordering: .sequentiallyConsistent) else { return false }
        state.withLock { s in _ = s.entries.removeValue(forKey: id) }
        return true
    }

    /// Stops taking requests (the first step of the agent's shutdown): new connections are
    /// answered 503 and closed, connections waiting for a request are closed, and the others
    /// are closed when their exchange ends. WebSockets stay until their handlers end.
    public func stopAccepting() {
        let idle = state.withLock { s -> [any Channel] in
            s.draining = true
            draining.store(true, ordering: .sequentiallyConsistent)
            let ids = s.entries.compactMap { id, entry -> UInt64? in
                if case .awaitingHead = entry.phase.phase { return id }
                return nil
            }
            return ids.compactMap { s.entries.removeValue(forKey: $0)?.channel }
        }
        for channel in idle { channel.close(promise: nil) }
    }

    /// A burst of connections (plain and WebSockets together): at least this many were
    /// open. When a quarter of them is left the heap is trimmed (``FreeMemory``), and again
    /// at each further quarter until at most a sixteenth of this is left, so the last trim
    /// comes after nearly all of the burst's buffers were freed: 3072 WebSockets and 500
    /// idle connections otherwise left about 57 MiB of free heap resident.
    public static let defaultBurstSize = 256

    func remove(_ id: UInt64) {
        let trim = state.withLock { s -> Bool in
            guard s.entries.removeValue(forKey: id) != nil || s.streams.removeValue(forKey: id) != nil else { return false }
            let open = s.entries.count + s.streams.count
            HTTPMetrics.connections.record(open)
            guard s.burstClosing || s.peak >= burstSize, open <= s.peak / 4 else { return false }
            s.peak = open
            s.burstClosing = open > burstSize / 16
            return true
        }
        if trim { releaseMemory() }
    }

    /// Closes every connection and refuses new ones.
    public func closeAll() {
        let channels = state.withLock { s -> [any Channel] in
            s.closedAll = true
            defer {
                s.entries.removeAll()
                s.streams.removeAll()
            }
            return s.entries.values.map(\.channel) + s.streams.values.map(\.channel)
        }
        for channel in channels { channel.close(promise: nil) }
    }

    /// Open connections, WebSockets included.
    public var count: Int { state.withLock { $0.entries.count + $0.streams.count } }

    /// Open connections with a request being read or answered.
    public var busyCount: Int {
        state.withLock { s in s.entries.values.count { if case .busy = $0.phase.phase { true } else { false } } }
    }

    /// Connections closed to make room for new ones, and connections refused because all
    /// were busy.
    public var counters: (evicted: Int, refused: Int) { state.withLock { ($0.evicted, $0.refused) } }
}
