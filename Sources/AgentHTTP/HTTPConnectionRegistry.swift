import CoreMetrics
import NIOCore
import Synchronization

/// Every open connection of one HTTP server, so that none can hold the agent up.
///
/// - At most ``maxConnections`` are open. A new connection beyond that closes the
///   connection that has waited longest for a request head (idle keep-alive or half-sent
///   heads); if every connection is busy (a request in progress or a WebSocket), the new
///   one is refused. So `/healthz` keeps answering while a local user holds thousands of
///   idle or half-open connections.
/// - ``closeAll()`` ends every connection (the last step of the agent's shutdown bound).
///
/// Memory: one small entry per open connection, at most ``maxConnections``.
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

    private struct Entry {
        var channel: any Channel
        var phase: Phase
    }

    private struct State {
        var entries: [UInt64: Entry] = [:]
        var nextID: UInt64 = 1
        var evicted = 0
        var refused = 0
        var closedAll = false
    }

    /// The cap on open connections.
    public let maxConnections: Int
    private let state = Mutex(State())

    public init(maxConnections: Int = AgentHTTPLimits.maxConnections) {
        self.maxConnections = maxConnections
    }

    /// Registers a new connection; returns its id, or nil when it must be refused.
    func admit(_ channel: any Channel) -> UInt64? {
        let (id, victim) = state.withLock { s -> (UInt64?, (any Channel)?) in
            if s.closedAll {
                s.refused += 1
                HTTPMetrics.refused.increment()
                return (nil, nil)
            }
            var victim: (any Channel)?
            if s.entries.count >= maxConnections {
                // Linear in the number of connections, and only when full.
                var oldest: (UInt64, NIODeadline)?
                for (id, entry) in s.entries {
                    if case .awaitingHead(let since) = entry.phase, oldest == nil || since < oldest!.1 {
                        oldest = (id, since)
                    }
                }
                guard let (victimID, _) = oldest else {
                    s.refused += 1
                    HTTPMetrics.refused.increment()
                    return (nil, nil)
                }
                victim = s.entries.removeValue(forKey: victimID)?.channel
                s.evicted += 1
                HTTPMetrics.evicted.increment()
            }
            let id = s.nextID
            s.nextID += 1
            s.entries[id] = Entry(channel: channel, phase: .awaitingHead(since: .now()))
            HTTPMetrics.connections.record(s.entries.count)
            return (id, victim)
        }
        victim?.close(promise: nil)
        return id
    }

    func setPhase(_ id: UInt64, _ phase: Phase) {
        state.withLock { s in s.entries[id]?.phase = phase }
    }

    func remove(_ id: UInt64) {
        state.withLock { s in
            if s.entries.removeValue(forKey: id) != nil { HTTPMetrics.connections.record(s.entries.count) }
        }
    }

    /// Closes every connection and refuses new ones.
    public func closeAll() {
        let channels = state.withLock { s -> [any Channel] in
            s.closedAll = true
            defer { s.entries.removeAll() }
            return s.entries.values.map(\.channel)
        }
        for channel in channels { channel.close(promise: nil) }
    }

    /// Open connections.
    public var count: Int { state.withLock { $0.entries.count } }

    /// Connections closed to make room for new ones, and connections refused because all
    /// were busy.
    public var counters: (evicted: Int, refused: Int) { state.withLock { ($0.evicted, $0.refused) } }
}
