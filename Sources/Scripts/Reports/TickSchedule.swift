/// A ticker's schedule on the continuous clock: ticks at `start + k × period`; a tick missed
/// while the work ran late (a loaded host) is skipped, not made up in a burst, as Go's
/// tickers do.
struct TickSchedule: Sendable {
    let period: Duration
    private(set) var next: ContinuousClock.Instant

    /// The first tick `first` from now (zero: at once).
    init(period: Duration, first: Duration) {
        precondition(period > .zero, "a tick period must be positive")
        self.period = period
        self.next = .now + first
    }

    /// Sleeps until the next tick and returns its scheduled instant; the following tick is
    /// the first one still ahead. Throws `CancellationError` when the task is cancelled.
    mutating func wait() async throws -> ContinuousClock.Instant {
        try await Task.sleep(until: next, clock: .continuous)
        let tick = next
        next = tick + period
        let now = ContinuousClock.now
        if next <= now {
            // Whole periods missed, skipped in one step (no loop).
            let missed = Int((now - next) / period) + 1
            next += period * missed
        }
        return tick
    }
}
