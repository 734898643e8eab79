/// The deadline of a polling loop in a test, which does not count the time the loop itself
/// could not run.
///
/// Why: a poll's sleep that ends far later than asked means the process had no thread free
/// for it (Swift's cooperative pool has two on the CI host, and a test computing for seconds
/// holds one), so the in-process work the poll waits for (a server, a stream) had none
/// either. Each sleep that ends over 200 ms late moves the deadline by as much, up to one
/// minute in all per deadline; a test's own time limit still bounds the whole.
public struct PollDeadline: Sendable {
    /// The most a deadline moves in all.
    public static let maxForgiven = Duration.seconds(60)
    /// Lateness below this is ordinary scheduling noise and counts.
    static let lateness = Duration.milliseconds(200)

    private var deadline: ContinuousClock.Instant
    private var forgiven = Duration.zero

    public init(_ timeout: Duration) {
        deadline = ContinuousClock.now + timeout
    }

    /// Whether the deadline (moved by the starved time) has passed, or the task was
    /// cancelled (its test's time limit): a cancelled sleep returns at once, so a loop that
    /// went on would spin on a cooperative thread every other test needs.
    public var hasPassed: Bool { Task.isCancelled || ContinuousClock.now >= deadline }

    /// Sleeps `interval`; what the sleep overran by, when over 200 ms, moves the deadline.
    public mutating func sleep(_ interval: Duration) async {
        let start = ContinuousClock.now
        try? await Task.sleep(for: interval)
        let late = ContinuousClock.now - start - interval
        guard late > Self.lateness, forgiven < Self.maxForgiven else { return }
        let extra = min(late, Self.maxForgiven - forgiven)
        forgiven += extra
        deadline += extra
    }
}
