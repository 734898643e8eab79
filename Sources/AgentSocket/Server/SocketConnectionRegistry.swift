import CoreMetrics
import NIOCore
import Synchronization

/// The agent socket's open connections: at most ``maxConnections``; a new one beyond that
/// closes the idle connection (no call in progress) that has been quiet longest, so clients
/// that connect and say nothing cannot lock others out, while a client waiting in a call
/// (`start` waiting for its dependencies) is never closed to make room. When every
/// connection is in a call, the new one is refused. ``closeAll()`` ends them at shutdown.
///
/// Memory: one small entry per connection; each connection holds at most one dRPC packet
/// being assembled (4 MiB), so all together at most `maxConnections` x 4 MiB.
final class SocketConnectionRegistry: Sendable {
    private struct Entry {
        var channel: any Channel
        var lastActive: NIODeadline
        var busy = false
    }

    private struct State {
        var entries: [UInt64: Entry] = [:]
        var nextID: UInt64 = 0
        var closed = false
    }

    let maxConnections: Int
    private let state = Mutex(State())

    init(maxConnections: Int) {
        self.maxConnections = maxConnections
    }

    /// Registers a connection; returns its id, or nil after ``closeAll()`` or when every
    /// connection is in a call. May close the quietest idle connection to make room.
    func admit(_ channel: any Channel) -> (id: UInt64, evicted: Bool)? {
        let result = state.withLock { s -> (UInt64, (any Channel)?)? in
            guard !s.closed else { return nil }
            var victim: (any Channel)?
            if s.entries.count >= maxConnections {
                guard let quietest = s.entries.filter({ !$0.value.busy }).min(by: { $0.value.lastActive < $1.value.lastActive }) else {
                    return nil
                }
                victim = s.entries.removeValue(forKey: quietest.key)?.channel
            }
            s.nextID += 1
            s.entries[s.nextID] = Entry(channel: channel, lastActive: .now())
            SocketMetrics.connections.record(s.entries.count)
            return (s.nextID, victim)
        }
        guard let (id, victim) = result else { return nil }
        victim?.close(promise: nil)
        return (id, victim != nil)
    }

    /// Notes activity, and whether a call is now in progress (nil: unchanged).
    func touch(_ id: UInt64, busy: Bool? = nil) {
        state.withLock { s in
            s.entries[id]?.lastActive = .now()
            if let busy { s.entries[id]?.busy = busy }
        }
    }

    func remove(_ id: UInt64) {
        state.withLock { s in
            if s.entries.removeValue(forKey: id) != nil { SocketMetrics.connections.record(s.entries.count) }
        }
    }

    /// Closes every connection and admits no more.
    func closeAll() {
        let channels = state.withLock { s -> [any Channel] in
            s.closed = true
            defer { s.entries.removeAll() }
            return s.entries.values.map(\.channel)
        }
        for channel in channels { channel.close(promise: nil) }
    }

    var count: Int { state.withLock { $0.entries.count } }

    /// Connections with a call in progress.
    var busyCount: Int { state.withLock { $0.entries.values.filter(\.busy).count } }

    /// True after ``closeAll()``.
    var isClosed: Bool { state.withLock { $0.closed } }
}
