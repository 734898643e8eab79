import Synchronization

/// Opens once; any number of tasks may wait, and a waiter that is cancelled leaves without
/// opening it (``OneShotSignal`` opens on a cancelled wait, by design for its single-waiter
/// races, so it cannot be waited on again and again, as a shutdown flag is).
public final class Latch: Sendable {
    private struct State {
        var open = false
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var next: UInt64 = 0
    }
    private let state = Mutex(State())

    public init() {}

    public var isOpen: Bool { state.withLock { $0.open } }

    public func open() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            guard !s.open else { return [] }
            s.open = true
            defer { s.waiters = [:] }
            return Array(s.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once open, or when the waiting task is cancelled.
    public func wait() async {
        let id = state.withLock { s -> UInt64 in
            s.next += 1
            return s.next
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.open || Task.isCancelled { return true }
                    s.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }
}
