import Synchronization

/// A ``LifecycleReporter`` that forwards every report and remembers when the start phase
/// ended (the first accepted `start_timeout`, `start_error` or `ready`), so that a module can
/// wait for the first manifest's startup scripts without knowing the module that runs them.
///
/// Memory: one continuation per waiting task (modules wait once each).
public final class StartPhaseWatch: LifecycleReporter {
    private struct State {
        var ended = false
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextID: UInt64 = 0
    }
    private let inner: any LifecycleReporter
    private let state = Mutex(State())

    public init(forwardingTo inner: any LifecycleReporter) {
        self.inner = inner
    }

    @discardableResult
    public func report(_ lifecycle: AgentLifecycleState) -> Bool {
        let accepted = inner.report(lifecycle)
        if accepted, [.startTimeout, .startError, .ready].contains(lifecycle) { markEnded() }
        return accepted
    }

    public var currentLifecycle: AgentLifecycleState { inner.currentLifecycle }

    /// Whether the start phase has ended.
    public var hasEnded: Bool { state.withLock { $0.ended } }

    /// Ends the start phase now (also what an accepted outcome does).
    public func markEnded() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            guard !s.ended else { return [] }
            s.ended = true
            defer { s.waiters = [:] }
            return Array(s.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the start phase has ended, or when the waiting task is cancelled.
    public func waitEnded() async {
        let id = state.withLock { s -> UInt64 in
            s.nextID += 1
            return s.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.ended || Task.isCancelled { return true }
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
