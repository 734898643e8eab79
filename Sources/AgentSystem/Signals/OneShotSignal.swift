import Synchronization

/// A latch that opens once; ``wait()`` returns when it opens or the waiting task is cancelled.
///
/// Used to race a process's exit, a timeout and a vanished client without leaving any
/// of the three waiting forever.
public final class OneShotSignal: Sendable {
    private struct State {
        var fired = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Mutex(State())

    public init() {}

    public func fire() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard !s.fired else { return nil }
            s.fired = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume()
    }

    /// Whether ``fire()`` was called.
    public var isFired: Bool { state.withLock { $0.fired } }

    /// Waits for ``fire()``; only one waiter at a time is supported.
    public func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { s -> Bool in
                    if s.fired { return true }
                    s.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            fire()
        }
    }
}
