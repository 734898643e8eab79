import Synchronization

/// The open connections of one of the agent's local listeners (the agent socket, the
/// boundary socket): at most ``maxConnections``. A newcomer beyond the cap closes the
/// connection that has been idle longest, so clients that connect and say nothing cannot
/// lock others out; when every connection is busy, ``WhenAllBusy`` decides. ``closeAll()``
/// ends them at shutdown.
///
/// What "busy" means is the listener's: a call in progress on the agent socket, a frame
/// begun and not ended on the boundary socket.
///
/// Memory: one small entry per connection, at most ``maxConnections`` entries. Making room
/// is linear in the number of connections, and only happens when the registry is full.
public final class LocalConnectionRegistry: Sendable {
    /// What a newcomer gets when every connection is busy.
    public enum WhenAllBusy: Sendable {
        /// Refused: busy connections are clients waiting on the agent, never cut.
        case refuse
        /// Admitted, closing the connection that has been busy longest (most likely stuck).
        case closeLongestBusy
    }

    private struct Entry {
        var close: @Sendable () -> Void
        var lastActive: ContinuousClock.Instant
        /// Since when the connection has been busy; nil when idle.
        var busySince: ContinuousClock.Instant?
    }

    private struct State {
        var entries: [UInt64: Entry] = [:]
        var nextID: UInt64 = 0
        var closed = false
        var evicted = 0
    }

    public let maxConnections: Int
    private let whenAllBusy: WhenAllBusy
    private let onCount: @Sendable (Int) -> Void
    private let state = Mutex(State())

    /// `onCount` is told the number of open connections whenever it changes (a gauge).
    public init(maxConnections: Int, whenAllBusy: WhenAllBusy, onCount: @escaping @Sendable (Int) -> Void = { _ in }) {
        precondition(maxConnections > 0)
        self.maxConnections = maxConnections
        self.whenAllBusy = whenAllBusy
        self.onCount = onCount
    }

    /// Registers a connection that `close` ends; returns its id and whether another was
    /// closed to make room, or nil after ``closeAll()`` or when it is refused.
    public func admit(close: @escaping @Sendable () -> Void) -> (id: UInt64, evicted: Bool)? {
        let result = state.withLock { s -> (id: UInt64, victim: (@Sendable () -> Void)?, count: Int)? in
            guard !s.closed else { return nil }
            var victim: (@Sendable () -> Void)?
            if s.entries.count >= maxConnections {
                let idle = s.entries.filter { $0.value.busySince == nil }.min { $0.value.lastActive < $1.value.lastActive }
                var key = idle?.key
                if key == nil, whenAllBusy == .closeLongestBusy {
                    key = s.entries.min { ($0.value.busySince ?? .now) < ($1.value.busySince ?? .now) }?.key
                }
                guard let key else { return nil }
                victim = s.entries.removeValue(forKey: key)?.close
                s.evicted += 1
            }
            s.nextID += 1
            s.entries[s.nextID] = Entry(close: close, lastActive: .now)
            return (s.nextID, victim, s.entries.count)
        }
        guard let result else { return nil }
        onCount(result.count)
        result.victim?()
        return (result.id, result.victim != nil)
    }

    /// Notes activity, and whether the connection is now busy (nil: unchanged). A connection
    /// already busy keeps the time it became so.
    public func touch(_ id: UInt64, busy: Bool? = nil) {
        state.withLock { s in
            guard var entry = s.entries[id] else { return }
            let now = ContinuousClock.now
            entry.lastActive = now
            switch busy {
            case true?: entry.busySince = entry.busySince ?? now
            case false?: entry.busySince = nil
            case nil: break
            }
            s.entries[id] = entry
        }
    }

    public func remove(_ id: UInt64) {
        let count = state.withLock { s -> Int? in s.entries.removeValue(forKey: id) != nil ? s.entries.count : nil }
        if let count { onCount(count) }
    }

    /// Closes every connection and admits no more.
    public func closeAll() {
        let closers = state.withLock { s -> [@Sendable () -> Void] in
            s.closed = true
            defer { s.entries.removeAll() }
            return s.entries.values.map(\.close)
        }
        for close in closers { close() }
        onCount(0)
    }

    public var count: Int { state.withLock { $0.entries.count } }

    /// Connections that are busy.
    public var busyCount: Int { state.withLock { $0.entries.values.filter { $0.busySince != nil }.count } }

    /// Connections closed to make room.
    public var evictedCount: Int { state.withLock { $0.evicted } }

    /// True after ``closeAll()``.
    public var isClosed: Bool { state.withLock { $0.closed } }
}
