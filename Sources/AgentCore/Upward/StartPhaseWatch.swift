/// A ``LifecycleReporter`` that forwards every report and remembers when the start phase
/// ended (the first accepted `start_timeout`, `start_error` or `ready`), so that a module can
/// wait for the first manifest's startup scripts without knowing the module that runs them.
///
/// Memory: one continuation per waiting task (modules wait once each).
public final class StartPhaseWatch: LifecycleReporter {
    private let inner: any LifecycleReporter
    private let ended = Latch()

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
    public var hasEnded: Bool { ended.isOpen }

    /// Ends the start phase now (also what an accepted outcome does).
    public func markEnded() { ended.open() }

    /// Returns once the start phase has ended, or when the waiting task is cancelled.
    public func waitEnded() async { await ended.wait() }
}
