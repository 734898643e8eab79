import CoreMetrics
import CAgentSpawn
import NIOCore
import Synchronization

/// One live reader of a process's output (a WebSocket stream).
///
/// The child never waits for a subscriber: the reactor appends to a queue bounded at
/// ``maxPendingBytes``, and all subscribers together at ``SubscriberBudget/maxBytes``.
/// When a slow subscriber's queue (or the shared budget) would overflow, everything it has
/// queued is discarded and counted; it then gets an ``Event/omitted(_:)`` event and
/// carries on with newer output.
///
/// Memory: each read from a child is copied once, in pieces of at most ``maxBatchBytes``,
/// into buffers shared by all of that process's subscribers. A subscriber therefore holds
/// at most `maxPendingBytes` of queued output plus the message being written (64 KiB);
/// since every queue is a suffix of the same output, subscribers of one process together
/// hold little more than one queue.
public final class OutputSubscription: Sendable {
    /// Queue bound per subscriber: 1 MiB.
    public static let maxPendingBytes = 1 << 20
    /// Largest batch ``next()`` hands out at once.
    public static let maxBatchBytes = 64 * 1024

    public enum Event: Sendable, Equatable {
        /// Output bytes, in order.
        case output(ByteBuffer)
        /// This many bytes were not delivered here (never retained, or dropped while slow).
        case omitted(Int)
        /// A text event for this client (its input was refused), before further output.
        case notice(String)
        /// The process exited; always the last event.
        case exit(ExitStatus)
    }

    /// Notices waiting at most (a client sending input that keeps failing gets no more).
    static let maxNotices = 4

    private struct State {
        var chunks: [ByteBuffer] = []
        var chunkStart = 0
        var pendingBytes = 0
        var omitted = 0
        var exit: ExitStatus?
        var exitDelivered = false
        var notices: [String] = []
        var cancelled = false
        var waiter: CheckedContinuation<Event?, Never>?
    }

    private let state = Mutex(State())
    private let budget: SubscriberBudget

    init(budget: SubscriberBudget) {
        self.budget = budget
    }

    /// What a queued chunk costs against the bounds: its bytes, but at least this much, so a
    /// process writing a byte at a time cannot queue a million tiny buffers (each has a
    /// storage header and a queue slot) within the byte bounds.
    static let minimumChunkCost = 512

    /// What `chunk` is charged against the bounds.
    static func cost(of chunk: ByteBuffer) -> Int { max(chunk.readableBytes, minimumChunkCost) }

    /// Called by the producer with at most ``maxBatchBytes`` at a time; never blocks.
    /// `bytes` may be shared with other subscribers.
    func push(_ bytes: ByteBuffer) {
        assert(bytes.readableBytes <= Self.maxBatchBytes, "the producer cuts output into messages")
        let count = Self.cost(of: bytes)
        let resume = state.withLock { s -> (CheckedContinuation<Event?, Never>, Event)? in
            guard !s.cancelled, s.exit == nil else { return nil }
            if s.pendingBytes + count > Self.maxPendingBytes || !budget.reserve(count) {
                // Drop what this subscriber has queued (its share of the budget comes back).
                let dropped = s.chunks[s.chunkStart...].reduce(0) { $0 + $1.readableBytes }
                s.omitted += dropped
                ProcessMetrics.omittedBytes.increment(by: dropped)
                budget.release(s.pendingBytes)
                s.chunks.removeAll(keepingCapacity: true)
                s.chunkStart = 0
                s.pendingBytes = 0
                if count > Self.maxPendingBytes || !budget.reserve(count) {
                    s.omitted += bytes.readableBytes
                    ProcessMetrics.omittedBytes.increment(by: bytes.readableBytes)
                    return Self.takeEvent(&s, budget)
                }
            }
            s.chunks.append(bytes)
            s.pendingBytes += count
            return Self.takeEvent(&s, budget)
        }
        if let (waiter, event) = resume { waiter.resume(returning: event) }
    }

    /// Counts bytes the subscriber will never see (the head/tail gap at subscription).
    func addOmitted(_ count: Int) {
        guard count > 0 else { return }
        state.withLock { $0.omitted += count }
    }

    /// Queues a text event for this client (dropped beyond ``maxNotices`` waiting).
    func notify(_ text: String) {
        let resume = state.withLock { s -> (CheckedContinuation<Event?, Never>, Event)? in
            guard !s.cancelled, !s.exitDelivered, s.notices.count < Self.maxNotices else { return nil }
            s.notices.append(text)
            return Self.takeEvent(&s, budget)
        }
        if let (waiter, event) = resume { waiter.resume(returning: event) }
    }

    /// Called once when the process exits.
    func finish(_ exit: ExitStatus) {
        let resume = state.withLock { s -> (CheckedContinuation<Event?, Never>, Event)? in
            guard s.exit == nil else { return nil }
            s.exit = exit
            return Self.takeEvent(&s, budget)
        }
        if let (waiter, event) = resume { waiter.resume(returning: event) }
    }

    /// Stops delivery and frees what is queued; a pending ``next()`` returns nil.
    public func cancel() {
        let waiter = state.withLock { s -> CheckedContinuation<Event?, Never>? in
            guard !s.cancelled else { return nil }
            s.cancelled = true
            budget.release(s.pendingBytes)
            s.chunks = []
            s.chunkStart = 0
            s.pendingBytes = 0
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// What is queued and not yet handed out, as charged against the bounds.
    var pendingBytes: Int { state.withLock { $0.pendingBytes } }

    /// The next event, or nil once the exit was delivered or the subscription cancelled.
    /// Cancelling the calling task cancels the subscription.
    public func next() async -> Event? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Event?, Never>) in
                let ready = state.withLock { s -> (Event?, Bool) in
                    if s.cancelled { return (nil, true) }
                    if let event = Self.nextEvent(&s, budget) { return (event, true) }
                    if s.exitDelivered { return (nil, true) }
                    s.waiter = continuation
                    return (nil, false)
                }
                if ready.1 { continuation.resume(returning: ready.0) }
            }
        } onCancel: {
            cancel()
        }
    }

    /// Hands the next event to a parked waiter, if there is one.
    private static func takeEvent(_ s: inout State, _ budget: SubscriberBudget) -> (CheckedContinuation<Event?, Never>, Event)? {
        guard let waiter = s.waiter, let event = nextEvent(&s, budget) else { return nil }
        s.waiter = nil
        return (waiter, event)
    }

    /// Removes and returns the next event: omitted count first, then output, then exit.
    /// Output is a slice of the shared buffer when one chunk fills the batch; small chunks
    /// are joined (one copy) so a chatty process does not become one frame per line.
    private static func nextEvent(_ s: inout State, _ budget: SubscriberBudget) -> Event? {
        if !s.notices.isEmpty { return .notice(s.notices.removeFirst()) }
        if s.omitted > 0 {
            defer { s.omitted = 0 }
            return .omitted(s.omitted)
        }
        if s.pendingBytes > 0 {
            // A chunk is at most one message (the producer cuts them so): it goes out whole,
            // without a copy, or joined with the small ones behind it.
            var batch = s.chunks[s.chunkStart]
            var cost = Self.cost(of: batch)
            s.chunkStart += 1
            if s.chunkStart < s.chunks.count, batch.readableBytes + s.chunks[s.chunkStart].readableBytes <= maxBatchBytes {
                var joined = ByteBuffer()
                joined.reserveCapacity(maxBatchBytes)
                joined.writeImmutableBuffer(batch)
                while s.chunkStart < s.chunks.count,
                    joined.readableBytes + s.chunks[s.chunkStart].readableBytes <= maxBatchBytes
                {
                    cost += Self.cost(of: s.chunks[s.chunkStart])
                    joined.writeImmutableBuffer(s.chunks[s.chunkStart])
                    s.chunkStart += 1
                }
                batch = joined
            }
            s.pendingBytes -= cost
            budget.release(cost)
            if s.chunkStart == s.chunks.count {
                s.chunks.removeAll(keepingCapacity: true)
                s.chunkStart = 0
            } else if s.chunkStart > 64 {
                s.chunks.removeFirst(s.chunkStart)
                s.chunkStart = 0
            }
            return .output(batch)
        }
        if let exit = s.exit, !s.exitDelivered {
            s.exitDelivered = true
            return .exit(exit)
        }
        return nil
    }
}

/// The bound on all stream subscribers of one process manager together: how many there
/// are, and how many bytes they have queued (counted per subscriber, so output shared by
/// several subscribers counts once for each: the real memory is at most this).
public final class SubscriberBudget: Sendable {
    /// Subscribers across all processes.
    public let maxSubscribers: Int
    /// Queued bytes across all subscribers.
    public let maxBytes: Int
    private let bytes = Atomic<Int>(0)
    private let subscribers = Atomic<Int>(0)

    public init(maxSubscribers: Int = 256, maxBytes: Int = 64 << 20) {
        self.maxSubscribers = maxSubscribers
        self.maxBytes = maxBytes
    }

    /// Takes `count` bytes from the budget; false (nothing taken) when they do not fit.
    func reserve(_ count: Int) -> Bool {
        bytes.add(count, upTo: maxBytes) != nil
    }

    func release(_ count: Int) {
        if count > 0 { bytes.subtract(count, ordering: .relaxed) }
    }

    /// Claims a subscriber slot; false when all are taken.
    func admit() -> Bool {
        guard let now = subscribers.add(1, upTo: maxSubscribers) else { return false }
        ProcessMetrics.subscribers.record(now)
        return true
    }

    func leave() {
        // When the last subscriber leaves, give the pages its output used back to the OS
        // (glibc keeps freed heap memory otherwise), a moment later so that the connections'
        // own buffers are freed first.
        let left = subscribers.subtract(1, ordering: .relaxed).newValue
        ProcessMetrics.subscribers.record(left)
        guard left == 0 else { return }
        Task.detached { [self] in
            try? await Task.sleep(for: .seconds(1))
            if subscribers.load(ordering: .relaxed) == 0 { agent_release_free_memory() }
        }
    }

    /// Subscribers now attached, and the bytes they have queued.
    public var usage: (subscribers: Int, bytes: Int) {
        (subscribers.load(ordering: .relaxed), bytes.load(ordering: .relaxed))
    }
}

extension Atomic where Value == Int {
    /// Adds `count` unless the sum would pass `limit`; the new value, or nil (unchanged).
    func add(_ count: Int, upTo limit: Int) -> Int? {
        var current = load(ordering: .relaxed)
        while current + count <= limit {
            let (exchanged, original) = compareExchange(expected: current, desired: current + count, ordering: .relaxed)
            if exchanged { return current + count }
            current = original
        }
        return nil
    }
}
