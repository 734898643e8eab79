import AgentSystem
import Testing

struct BackoffTests {
    /// Doubling from the initial delay to the cap, for any failure count (bounded work).
    @Test func ceilingsDoubleToTheCap() {
        let backoff = Backoff(initial: .seconds(1), maximum: .seconds(60), jitter: .none)
        #expect(backoff.ceiling(afterFailures: 0) == .zero)
        #expect(backoff.ceiling(afterFailures: 1) == .seconds(1))
        #expect(backoff.ceiling(afterFailures: 2) == .seconds(2))
        #expect(backoff.ceiling(afterFailures: 6) == .seconds(32))
        #expect(backoff.ceiling(afterFailures: 7) == .seconds(60))
        #expect(backoff.ceiling(afterFailures: .max) == .seconds(60))
        #expect(backoff.delay(afterFailures: 3, unit: 0.3) == .seconds(4))
    }

    @Test func jitterStaysInItsRange() {
        let spread = Backoff(initial: .seconds(10), maximum: .seconds(10), jitter: .spread(0.2))
        // Within a microsecond: the spread is computed in floating point.
        func near(_ a: Duration, _ b: Duration) -> Bool { a - b < .microseconds(1) && b - a < .microseconds(1) }
        #expect(near(spread.delay(afterFailures: 1, unit: 0), .seconds(8)))
        #expect(near(spread.delay(afterFailures: 1, unit: 1), .seconds(12)))
        #expect(near(spread.delay(afterFailures: 1, unit: 7), .seconds(12)), "unit is clamped")
        let half = Backoff(initial: .seconds(4), maximum: .seconds(4), jitter: .upperHalf)
        #expect(half.delay(afterFailures: 1, unit: 0) == .seconds(2))
        #expect(half.delay(afterFailures: 1, unit: 1) == .seconds(4))
        for _ in 0..<100 {
            let d = spread.delay(afterFailures: 5)
            #expect(d >= .seconds(8) - .microseconds(1) && d <= .seconds(12) + .microseconds(1))
        }
    }

    /// A retry loop: immediate first attempt, then the schedule; reset starts over.
    @Test func nextCountsAndResetStartsOver() {
        var backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(1), jitter: .none)
        #expect(backoff.next() == .zero)
        #expect(backoff.next() == .milliseconds(100))
        #expect(backoff.next() == .milliseconds(200))
        #expect(backoff.failures == 3)
        backoff.reset()
        #expect(backoff.next() == .zero)
    }

    /// A call made at once and retried on failure: each failure's wait follows the schedule.
    @Test func failedCountsFromTheFirstWait() {
        var backoff = Backoff(initial: .seconds(1), maximum: .seconds(10), jitter: .none)
        #expect(
            [backoff.failed(), backoff.failed(), backoff.failed(), backoff.failed(), backoff.failed()]
                == [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(10)])
        #expect(backoff.failures == 5)
        backoff.reset()
        #expect(backoff.failed() == .seconds(1))
    }
}
