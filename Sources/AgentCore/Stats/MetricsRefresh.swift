import Synchronization

/// What brings metrics kept elsewhere up to date just before they are read (a `/metrics`
/// scrape, the stats report upward): the agent's `/proc` figures, the tunnel stack's own
/// counters. Modules register when they are built; the agent holds a handful (the bound).
public final class MetricsRefresh: Sendable {
    private let actions = Mutex<[@Sendable () -> Void]>([])

    public init() {}

    public func register(_ action: @escaping @Sendable () -> Void) {
        actions.withLock { $0.append(action) }
    }

    /// Runs every registered action, in the order registered (outside the lock).
    public func run() {
        for action in actions.withLock({ $0 }) { action() }
    }
}
