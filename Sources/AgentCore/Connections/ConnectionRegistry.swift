import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The open connections of one of the agent's listeners (the HTTP API, the agent socket,
/// the boundary socket), so that none can hold the agent up:
///
/// - At most ``maxConnections`` connections. A newcomer beyond the cap closes the one idle
///   longest, so clients that connect and say nothing cannot lock others out; when every
///   connection is busy, ``WhenAllBusy`` decides.
/// - Long-lived streams (the HTTP API's WebSockets) leave the cap for a budget of their own,
///   ``maxStreams``: ``reserveStream()`` before the upgrade, ``Phase/stream`` after it.
/// - ``stopAccepting()`` begins a shutdown: newcomers get ``Admission/draining``, idle
///   connections are closed, busy ones are to close when they go idle (``setPhase(_:_:)``).
/// - ``closeAll()`` ends every connection and admits no more.
///
/// What "busy" means is the listener's: a request in progress (HTTP), a call in progress
/// (agent socket), a frame begun and not ended (boundary socket). A connection's phase is
/// written without the registry's lock (HTTP writes it twice per request from every event
/// loop) and read under it when making room or draining.
///
/// Memory: one small entry per open connection, at most ``maxConnections`` plus
/// ``maxStreams``. Making room is linear in the number of connections, and only happens when
/// the registry is full.
public final class ConnectionRegistry: Sendable {
    /// What a newcomer gets when every connection is busy.
    public enum WhenAllBusy: Sendable {
        /// Refused: busy connections are clients waiting on the agent, never cut.
        case refuse
        /// Admitted, closing the connection that has been busy longest (most likely stuck).
        case closeLongestBusy
    }

    /// What a connection is doing. Times are the monotonic clock's nanoseconds
    /// (``uptimeNanoseconds()``, the same clock as NIO's deadlines).
    public enum Phase: Sendable, Equatable {
        /// Idle (waiting for a request, a call, a frame) since this time: evictable.
        case idle(since: UInt64)
        /// Busy since this time.
        case busy(since: UInt64)
        /// A long-lived stream, counted by ``maxStreams`` and never evicted.
        case stream
    }

    /// One admitted connection: its id and its phase, which its owner writes without the
    /// registry's lock.
    public final class Connection: Sendable {
        public let id: UInt64
        /// >= 0 idle since, -1 stream, <= -2 busy since (-2 - value).
        private let raw: Atomic<Int64>

        init(id: UInt64, _ phase: Phase) {
            self.id = id
            raw = Atomic(Self.encode(phase))
        }

        public var phase: Phase {
            let value = raw.load(ordering: .sequentiallyConsistent)
            if value >= 0 { return .idle(since: UInt64(value)) }
            if value == -1 { return .stream }
            return .busy(since: UInt64(-(value + 2)))
        }

        /// Stores `phase` (no registry bookkeeping: see ``ConnectionRegistry/setPhase(_:_:)``).
        public func store(_ phase: Phase) { raw.store(Self.encode(phase), ordering: .sequentiallyConsistent) }

        private static func encode(_ phase: Phase) -> Int64 {
            switch phase {
            case .idle(let since): return Int64(clamping: since)
            case .stream: return -1
            case .busy(let since): return -2 - Int64(clamping: min(since, UInt64(Int64.max - 2)))
            }
        }
    }

    /// What ``register(close:)`` decided.
    public enum Admission: Sendable {
        /// Registered; `evicted` when another connection was closed to make room.
        case admitted(Connection, evicted: Bool)
        /// Over the cap with no connection to close, or after ``closeAll()``: close at once.
        case refused
        /// The listener is shutting down (``stopAccepting()``): say so, then close.
        case draining
    }

    /// Counters and gauges for a listener's metrics; each is called with the registry's lock
    /// held, so it must be quick and must not call back into the registry.
    public struct Observer: Sendable {
        /// Open connections, streams included, whenever the number changes.
        public var open: @Sendable (Int) -> Void = { _ in }
        public var evicted: @Sendable () -> Void = {}
        public var refused: @Sendable () -> Void = {}
        /// Stream slots held, whenever the number changes.
        public var streams: @Sendable (Int) -> Void = { _ in }
        public var streamRefused: @Sendable () -> Void = {}

        public init(
            open: @escaping @Sendable (Int) -> Void = { _ in }, evicted: @escaping @Sendable () -> Void = {},
            refused: @escaping @Sendable () -> Void = {}, streams: @escaping @Sendable (Int) -> Void = { _ in },
            streamRefused: @escaping @Sendable () -> Void = {}
        ) {
            self.open = open
            self.evicted = evicted
            self.refused = refused
            self.streams = streams
            self.streamRefused = streamRefused
        }
    }

    private struct Entry {
        var close: @Sendable () -> Void
        var connection: Connection
    }

    private struct State {
        /// Connections under the cap.
        var entries: [UInt64: Entry] = [:]
        /// Streams, counted by ``maxStreams`` instead.
        var streams: [UInt64: Entry] = [:]
        var nextID: UInt64 = 0
        var closed = false
        var draining = false
        var evicted = 0
        var refused = 0
        var streamSlots = 0
        var streamsRefused = 0
        /// Most connections open since memory was last given back.
        var peak = 0
        /// A burst is closing: memory is given back at each further quarter of the peak.
        var burstClosing = false
    }

    public let maxConnections: Int
    /// The budget of long-lived streams, beside ``maxConnections``.
    public let maxStreams: Int
    private let whenAllBusy: WhenAllBusy
    private let observer: Observer
    /// Connections (streams included) that make a burst worth giving memory back after
    /// (nil: never).
    private let burstSize: Int?
    private let releaseMemory: @Sendable () -> Void
    private let state = Mutex(State())
    /// Mirrors `State.draining` for ``setPhase(_:_:)``'s lock-free path.
    private let draining = Atomic(false)

    /// `releaseMemory` is called (outside the lock) when a burst of at least `burstSize`
    /// connections has mostly closed.
    public init(
        maxConnections: Int, maxStreams: Int = 0, whenAllBusy: WhenAllBusy, observer: Observer = Observer(),
        burstSize: Int? = nil, releaseMemory: @escaping @Sendable () -> Void = {}
    ) {
        precondition(maxConnections > 0)
        self.maxConnections = maxConnections
        self.maxStreams = maxStreams
        self.whenAllBusy = whenAllBusy
        self.observer = observer
        self.burstSize = burstSize
        self.releaseMemory = releaseMemory
    }

    /// A listener that only counts: `onCount` is told the number of open connections
    /// whenever it changes (a gauge).
    public convenience init(maxConnections: Int, whenAllBusy: WhenAllBusy, onCount: @escaping @Sendable (Int) -> Void) {
        self.init(maxConnections: maxConnections, whenAllBusy: whenAllBusy, observer: Observer(open: onCount))
    }

    /// The monotonic clock's nanoseconds (CLOCK_MONOTONIC, as NIO's `NIODeadline`).
    public static func uptimeNanoseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    // MARK: Admission

    /// Registers a connection that `close` ends, idle from now.
    public func register(close: @escaping @Sendable () -> Void) -> Admission {
        let (admission, victim) = state.withLock { s -> (Admission, (@Sendable () -> Void)?) in
            if s.closed || s.draining {
                s.refused += 1
                observer.refused()
                return (s.closed ? .refused : .draining, nil)
            }
            var victim: (@Sendable () -> Void)?
            if s.entries.count >= maxConnections {
                guard let key = victimKey(s.entries) else {
                    s.refused += 1
                    observer.refused()
                    return (.refused, nil)
                }
                victim = s.entries.removeValue(forKey: key)?.close
                s.evicted += 1
                observer.evicted()
            }
            s.nextID += 1
            let connection = Connection(id: s.nextID, .idle(since: Self.uptimeNanoseconds()))
            s.entries[s.nextID] = Entry(close: close, connection: connection)
            let open = s.entries.count + s.streams.count
            s.peak = max(s.peak, open)
            observer.open(open)
            return (.admitted(connection, evicted: victim != nil), victim)
        }
        victim?()
        return admission
    }

    /// The connection to close for a newcomer: the one idle longest, else (if allowed) the
    /// one busy longest.
    private func victimKey(_ entries: [UInt64: Entry]) -> UInt64? {
        var idle: (UInt64, UInt64)?
        var busy: (UInt64, UInt64)?
        for (id, entry) in entries {
            switch entry.connection.phase {
            case .idle(let since): if idle == nil || since < idle!.1 { idle = (id, since) }
            case .busy(let since): if busy == nil || since < busy!.1 { busy = (id, since) }
            case .stream: break
            }
        }
        if let idle { return idle.0 }
        return whenAllBusy == .closeLongestBusy ? busy?.0 : nil
    }

    /// Records what `connection` does. A stream leaves the cap for the stream budget; while
    /// draining, a connection that goes idle is to be closed: returns true, and the caller
    /// closes it (once its last answer is written).
    ///
    /// Lock-free unless draining or becoming a stream. `draining` is set before the drain
    /// scans the phases and read here after the phase is stored (both sequentially
    /// consistent), so a connection going idle during a drain is closed by the scan, by this
    /// call, or by both (closing twice is harmless).
    @discardableResult
    public func setPhase(_ connection: Connection, _ phase: Phase) -> Bool {
        connection.store(phase)
        switch phase {
        case .stream:
            state.withLock { s in
                if let entry = s.entries.removeValue(forKey: connection.id) { s.streams[connection.id] = entry }
            }
            return false
        case .busy:
            return false
        case .idle:
            guard draining.load(ordering: .sequentiallyConsistent) else { return false }
            state.withLock { s in _ = s.entries.removeValue(forKey: connection.id) }
            return true
        }
    }

    /// Notes activity on connection `id`, and whether it is now busy (nil: unchanged). A
    /// connection already busy keeps the time it became so.
    public func touch(_ id: UInt64, busy: Bool? = nil) {
        guard let connection = state.withLock({ s in (s.entries[id] ?? s.streams[id])?.connection }) else { return }
        let now = Self.uptimeNanoseconds()
        switch (connection.phase, busy) {
        case (.stream, _): return
        case (.busy, true?), (.busy, nil): return
        case (_, true?): setPhase(connection, .busy(since: now))
        case (_, false?), (.idle, nil): setPhase(connection, .idle(since: now))
        }
    }

    public func remove(_ id: UInt64) {
        let trim = state.withLock { s -> Bool in
            guard s.entries.removeValue(forKey: id) != nil || s.streams.removeValue(forKey: id) != nil else { return false }
            let open = s.entries.count + s.streams.count
            observer.open(open)
            guard let burstSize, s.burstClosing || s.peak >= burstSize, open <= s.peak / 4 else { return false }
            s.peak = open
            s.burstClosing = open > burstSize / 16
            return true
        }
        if trim { releaseMemory() }
    }

    // MARK: Streams

    /// Takes a stream slot for an upgrade about to be accepted; false (counted) when the
    /// budget is used up. Given back with ``releaseStream()``.
    public func reserveStream() -> Bool {
        state.withLock { s in
            guard s.streamSlots < maxStreams else {
                s.streamsRefused += 1
                observer.streamRefused()
                return false
            }
            s.streamSlots += 1
            observer.streams(s.streamSlots)
            return true
        }
    }

    public func releaseStream() {
        state.withLock { s in
            s.streamSlots -= 1
            observer.streams(s.streamSlots)
        }
    }

    /// Stream slots held now, and upgrades refused for want of one.
    public var streamCounters: (open: Int, refused: Int) { state.withLock { ($0.streamSlots, $0.streamsRefused) } }

    // MARK: Shutdown

    /// Stops admitting (newcomers get ``Admission/draining``) and closes the idle
    /// connections; busy ones are closed when they go idle. Streams stay until they end.
    public func stopAccepting() {
        let idle = state.withLock { s -> [@Sendable () -> Void] in
            s.draining = true
            draining.store(true, ordering: .sequentiallyConsistent)
            let ids = s.entries.compactMap { id, entry -> UInt64? in
                if case .idle = entry.connection.phase { return id }
                return nil
            }
            return ids.compactMap { s.entries.removeValue(forKey: $0)?.close }
        }
        for close in idle { close() }
    }

    /// Closes every connection and admits no more.
    public func closeAll() {
        let closers = state.withLock { s -> [@Sendable () -> Void] in
            s.closed = true
            defer {
                s.entries.removeAll()
                s.streams.removeAll()
            }
            return s.entries.values.map(\.close) + s.streams.values.map(\.close)
        }
        for close in closers { close() }
        observer.open(0)
    }

    // MARK: Counts

    /// Open connections, streams included.
    public var count: Int { state.withLock { $0.entries.count + $0.streams.count } }

    /// Connections that are busy.
    public var busyCount: Int {
        state.withLock { s in s.entries.values.count { if case .busy = $0.connection.phase { true } else { false } } }
    }

    /// Connections closed to make room.
    public var evictedCount: Int { state.withLock { $0.evicted } }

    /// Connections closed to make room, and connections refused (full and all busy, or
    /// shutting down).
    public var counters: (evicted: Int, refused: Int) { state.withLock { ($0.evicted, $0.refused) } }

    /// True after ``closeAll()``.
    public var isClosed: Bool { state.withLock { $0.closed } }
}

/// The agent socket's and the boundary socket's registry (no streams, no drain).
public typealias LocalConnectionRegistry = ConnectionRegistry

extension ConnectionRegistry {
    /// Registers a connection that `close` ends; returns its id and whether another was
    /// closed to make room, or nil after ``closeAll()`` or when it is refused.
    public func admit(close: @escaping @Sendable () -> Void) -> (id: UInt64, evicted: Bool)? {
        guard case .admitted(let connection, let evicted) = register(close: close) else { return nil }
        return (connection.id, evicted)
    }
}
