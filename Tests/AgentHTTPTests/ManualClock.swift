import Synchronization

/// A clock that moves only when a test advances it: the state machine's deadlines are read
/// against it, so no test waits on wall-clock time.
final class ManualClock: Clock, Sendable {
    struct Instant: InstantProtocol {
        var offset: Duration

        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (a: Instant, b: Instant) -> Bool { a.offset < b.offset }
    }

    private let current = Mutex(Instant(offset: .zero))

    var now: Instant { current.withLock { $0 } }
    var minimumResolution: Duration { .nanoseconds(1) }

    /// Moves the clock forward.
    func advance(by duration: Duration) {
        current.withLock { $0 = $0.advanced(by: duration) }
    }

    /// Never needed by the machine (it is told the time with each event).
    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        throw CancellationError()
    }
}
