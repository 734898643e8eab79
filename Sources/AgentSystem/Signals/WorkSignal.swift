import Synchronization

/// A wake-up flag for one waiting task: `notify` before `wait` is not lost.
public final class WorkSignal: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Mutex(State())

    public init() {}

    public func notify() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if let w = s.waiter {
                s.waiter = nil
                return w
            }
            s.pending = true
            return nil
        }
        waiter?.resume()
    }

    /// Returns after a `notify` (possibly an earlier one) or when the task is cancelled.
    public func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.pending {
                        s.pending = false
                        return true
                    }
                    s.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            notify()
        }
    }
}
