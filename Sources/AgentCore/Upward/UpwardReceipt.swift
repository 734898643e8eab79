import Synchronization

/// What became of one item sent upward.
public enum UpwardOutcome: Sendable, Equatable {
    /// The control plane acknowledged it.
    case delivered
    /// The control plane answered with this error; retrying cannot help, so it is gone.
    case rejected(String)
    /// Its outbox was full and it was the oldest item, so it made room for a newer one.
    case dropped
    /// No control plane is configured: it was written to the agent's log.
    case logged
    /// The agent shut down before it could be delivered.
    case abandoned
}

/// The outcome of one item sent upward, once known. Any number of tasks may wait on it;
/// a wait ends early (returning nil) when the waiting task is cancelled. Its sender may take
/// the item back while it waits in its queue (``withdraw()``).
public final class UpwardReceipt: Sendable {
    private struct State {
        var outcome: UpwardOutcome?
        var waiters: [UInt64: CheckedContinuation<UpwardOutcome?, Never>] = [:]
        var nextWaiter: UInt64 = 0
        /// Set by the queue holding the item: removes it if it has not been sent yet.
        var withdrawal: (@Sendable () -> Bool)?
    }
    private let state = Mutex(State())

    public init() {}

    /// A receipt that is already settled.
    public static func settled(_ outcome: UpwardOutcome) -> UpwardReceipt {
        let receipt = UpwardReceipt()
        receipt.settle(outcome)
        return receipt
    }

    /// Records the outcome; later calls are ignored (an item has one fate).
    public func settle(_ outcome: UpwardOutcome) {
        let waiters = state.withLock { s -> [CheckedContinuation<UpwardOutcome?, Never>] in
            guard s.outcome == nil else { return [] }
            s.outcome = outcome
            defer { s.waiters.removeAll() }
            return Array(s.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: outcome) }
    }

    /// Called by the queue that holds the item: `take` removes it if it has not been sent.
    public func allowWithdrawal(_ take: @escaping @Sendable () -> Bool) {
        state.withLock { $0.withdrawal = take }
    }

    /// Takes the item back if its queue still holds it unsent: true, and its outcome is
    /// `.abandoned` (the sender keeps it elsewhere). False when it has an outcome already,
    /// is on its way, or its queue cannot give it back.
    public func withdraw() -> Bool {
        guard let take = state.withLock({ $0.outcome == nil ? $0.withdrawal : nil }), take() else { return false }
        settle(.abandoned)
        return true
    }

    /// The outcome if it is known.
    public var outcome: UpwardOutcome? { state.withLock { $0.outcome } }

    /// Waits for the outcome; nil when the waiting task is cancelled first.
    public func wait() async -> UpwardOutcome? {
        let id = state.withLock { s -> UInt64 in
            s.nextWaiter += 1
            return s.nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<UpwardOutcome?, Never>) in
                let now = state.withLock { s -> UpwardOutcome?? in
                    if let outcome = s.outcome { return .some(outcome) }
                    if Task.isCancelled { return .some(nil) }
                    s.waiters[id] = continuation
                    return .none
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume(returning: nil)
        }
    }
}
