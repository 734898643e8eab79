import Synchronization

/// The agent's shutdown bound and, once shutdown has begun, its deadline: modules that
/// must finish inside the bound (the final reports) read it.
public final class ShutdownClock: Sendable {
    /// The agent's own part of the bound: from the first terminating signal to exit,
    /// whatever clients or services do, when no stop script needs time.
    public let base: Duration

    private struct State {
        var began: ContinuousClock.Instant?
        /// Added to ``base`` for the workspace's stop scripts; frozen when shutdown begins.
        var allowance: Duration = .zero
    }
    private let state = Mutex(State())

    public init(bound: Duration) {
        self.base = bound
    }

    /// From the first terminating signal to exit: ``base`` plus the stop scripts' allowance.
    public var bound: Duration { state.withLock { base + $0.allowance } }

    /// Sets the time the stop scripts may take on top of ``base`` (replacing the last
    /// value); ignored once shutdown has begun, so the deadline never moves.
    public func allow(_ allowance: Duration) {
        state.withLock { s in
            if s.began == nil { s.allowance = max(.zero, allowance) }
        }
    }

    /// Records the start of shutdown (the first call wins); returns the deadline.
    @discardableResult
    public func begin(at instant: ContinuousClock.Instant = .now) -> ContinuousClock.Instant {
        state.withLock { s in
            s.began = s.began ?? instant
            return s.began! + base + s.allowance
        }
    }

    /// When the agent will have exited; nil before shutdown begins.
    public var deadline: ContinuousClock.Instant? { state.withLock { s in s.began.map { $0 + base + s.allowance } } }
}
