import Synchronization

/// The agent's shutdown bound and, once shutdown has begun, its deadline: modules that
/// must finish inside the bound (the final reports) read it.
public final class ShutdownClock: Sendable {
    /// From the first terminating signal to exit, whatever clients or services do.
    public let bound: Duration
    private let began = Mutex<ContinuousClock.Instant?>(nil)

    public init(bound: Duration) {
        self.bound = bound
    }

    /// Records the start of shutdown (the first call wins); returns the deadline.
    @discardableResult
    public func begin(at instant: ContinuousClock.Instant = .now) -> ContinuousClock.Instant {
        began.withLock { at in
            at = at ?? instant
            return at! + bound
        }
    }

    /// When the agent will have exited; nil before shutdown begins.
    public var deadline: ContinuousClock.Instant? { began.withLock { $0.map { $0 + bound } } }
}
