import AgentCore
import CoreMetrics
import Metrics
import Synchronization

/// A bounded, ordered queue of items to send upward; it survives reconnects (an item is
/// removed only after the control plane acknowledged it) and counts what overflowed.
///
/// `append` never blocks: when the queue holds `capacity` items, the oldest is dropped and
/// counted in ``dropped``. Items the control plane refused are removed and counted in
/// ``rejected``. Items carry sequence numbers so an acknowledgement never removes an item
/// that was not sent. An item may carry an ``UpwardReceipt``, settled with its fate
/// (delivered, rejected, dropped, logged or abandoned).
///
/// Memory: at most `capacity` items and their receipts.
public final class Outbox<Item: Sendable>: UpwardQueue, Sendable {
    public let name: String
    public let capacity: Int
    private struct State {
        var items: [(seq: UInt64, item: Item, receipt: UpwardReceipt?)] = []
        var head = 0
        var nextSeq: UInt64 = 0
        /// The newest item handed out by ``peek(_:budget:size:)`` (on its way, or sent and
        /// not yet acknowledged): it and older ones can no longer be withdrawn.
        var peekedThrough: UInt64?
        var dropped = 0
        var rejected = 0
    }
    private let state = Mutex(State())
    private let signal: WorkSignal?
    /// `agent_upward_items_*` with an `outbox` label (swift-metrics).
    private let droppedCounter: Counter
    private let rejectedCounter: Counter
    private let queuedGauge: Gauge

    /// - Parameter signal: notified on every append (the sender waits on it).
    public init(name: String, capacity: Int, signal: WorkSignal? = nil) {
        precondition(capacity > 0)
        self.name = name
        self.capacity = capacity
        self.signal = signal
        droppedCounter = Counter(label: "agent_upward_items_dropped_total", dimensions: [("outbox", name)])
        rejectedCounter = Counter(label: "agent_upward_items_rejected_total", dimensions: [("outbox", name)])
        queuedGauge = Gauge(label: "agent_upward_items_queued", dimensions: [("outbox", name)])
    }

    /// Adds an item; returns false when an older item had to be dropped for it.
    @discardableResult
    public func append(_ item: Item, receipt: UpwardReceipt? = nil) -> Bool {
        let (kept, droppedReceipt, seq) = state.withLock { s -> (Bool, UpwardReceipt?, UInt64) in
            var kept = true
            var droppedReceipt: UpwardReceipt?
            if s.items.count - s.head >= capacity {
                droppedReceipt = s.items[s.head].receipt
                s.head += 1
                s.dropped += 1
                droppedCounter.increment()
                kept = false
            }
            let seq = s.nextSeq
            s.items.append((seq, item, receipt))
            s.nextSeq += 1
            queuedGauge.record(s.items.count - s.head)
            if s.head > 64 && s.head * 2 > s.items.count {
                s.items.removeFirst(s.head)
                s.head = 0
            }
            return (kept, droppedReceipt, seq)
        }
        receipt?.allowWithdrawal { [weak self] in self?.withdraw(seq) ?? false }
        droppedReceipt?.settle(.dropped)
        signal?.notify()
        return kept
    }

    /// Up to `max` of the oldest items, left in place, with the sequence number to
    /// acknowledge them by.
    public func peek(_ max: Int = 1) -> (through: UInt64, items: [Item])? {
        peek(max, budget: 0, size: { _ in 0 })
    }

    /// The oldest items, left in place, as many as fit `budget` by `size` (at most `max`,
    /// and always at least one: a single item larger than the budget goes alone).
    public func peek(_ max: Int, budget: Int, size: (Item) -> Int) -> (through: UInt64, items: [Item])? {
        state.withLock { s -> (through: UInt64, items: [Item])? in
            guard s.head < s.items.count else { return nil }
            var end = s.head
            var used = 0
            while end < s.items.count, end - s.head < max {
                let next = size(s.items[end].item)
                if end > s.head, used + next > budget { break }
                used += next
                end += 1
            }
            let slice = s.items[s.head..<end]
            s.peekedThrough = Swift.max(s.peekedThrough ?? 0, slice.last!.seq)
            return (slice.last!.seq, slice.map(\.item))
        }
    }

    /// Removes every item up to and including sequence number `through`, settling their
    /// receipts with `outcome` (the control plane acknowledged them, or standalone, they
    /// were logged).
    public func acknowledge(through: UInt64, as outcome: UpwardOutcome = .delivered) {
        for receipt in removeItems(through: through).receipts { receipt.settle(outcome) }
    }

    /// Removes every item up to and including `through` because the control plane refused
    /// them (retrying cannot help), counting them in ``rejected``.
    public func reject(through: UInt64, reason: String) {
        let (receipts, removed) = removeItems(through: through, countingRejected: true)
        rejectedCounter.increment(by: Int64(removed))
        for receipt in receipts { receipt.settle(.rejected(reason)) }
    }

    /// Removes the item `seq` if it is queued and was never handed out to be sent (its
    /// receipt's ``UpwardReceipt/withdraw()``).
    private func withdraw(_ seq: UInt64) -> Bool {
        state.withLock { s in
            if let peeked = s.peekedThrough, seq <= peeked { return false }
            guard let index = s.items[s.head...].firstIndex(where: { $0.seq == seq }) else { return false }
            s.items.remove(at: index)
            queuedGauge.record(s.items.count - s.head)
            return true
        }
    }

    /// Settles the receipts of every queued item as abandoned (the session ended before
    /// they could go); the items stay, counted in ``count``.
    public func abandonAll() {
        let receipts = state.withLock { s in s.items[s.head...].compactMap(\.receipt) }
        for receipt in receipts { receipt.settle(.abandoned) }
    }

    private func removeItems(through: UInt64, countingRejected: Bool = false) -> (receipts: [UpwardReceipt], removed: Int) {
        state.withLock { s in
            var receipts: [UpwardReceipt] = []
            var removed = 0
            while s.head < s.items.count, s.items[s.head].seq <= through {
                if let receipt = s.items[s.head].receipt { receipts.append(receipt) }
                s.head += 1
                removed += 1
            }
            if countingRejected { s.rejected += removed }
            queuedGauge.record(s.items.count - s.head)
            return (receipts, removed)
        }
    }

    /// Items the control plane refused.
    public var rejected: Int { state.withLock { $0.rejected } }

    public var count: Int { state.withLock { $0.items.count - $0.head } }
    public var isEmpty: Bool { count == 0 }
    /// Items dropped because the queue was full.
    public var dropped: Int { state.withLock { $0.dropped } }
}

/// What the session needs of every outbox whatever its item type: counts and the end.
protocol UpwardQueue: AnyObject, Sendable {
    var name: String { get }
    var isEmpty: Bool { get }
    var dropped: Int { get }
    var rejected: Int { get }
    func abandonAll()
}
