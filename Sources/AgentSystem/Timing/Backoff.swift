/// How long to wait before trying again after failures in a row: `initial` after the first,
/// times `factor` for each further one up to `maximum`, with jitter so peers that failed
/// together do not retry together. Each caller configures its own schedule; `next()` and
/// `reset()` keep the count for a retry loop.
public struct Backoff: Sendable, Equatable {
    /// How a delay is drawn from its ceiling.
    public enum Jitter: Sendable, Equatable {
        /// Exactly the ceiling.
        case none
        /// The ceiling times 1 ± `fraction`, uniformly.
        case spread(Double)
        /// Uniformly in [ceiling/2, ceiling].
        case upperHalf
    }

    /// At most this many multiplications per ceiling: any failure count costs bounded work
    /// and cannot overflow (2^62 of any start is beyond every `maximum`).
    public static let maxSteps = 62

    public var initial: Duration
    public var maximum: Duration
    public var factor: Double
    public var jitter: Jitter
    /// Failures counted by `next()` since the last `reset()`.
    public private(set) var failures = 0

    public init(initial: Duration, maximum: Duration, factor: Double = 2, jitter: Jitter) {
        self.initial = initial
        self.maximum = maximum
        self.factor = max(factor, 1)
        self.jitter = jitter
    }

    /// The longest wait after `failures` failures in a row: zero for none, `initial` for one.
    public func ceiling(afterFailures failures: Int) -> Duration {
        guard failures > 0 else { return .zero }
        var delay = initial
        for _ in 0..<min(failures - 1, Self.maxSteps) where delay < maximum { delay = delay * factor }
        return min(delay, maximum)
    }

    /// The wait after `failures` failures in a row, `unit` in 0...1 placing it in the jitter's range.
    public func delay(afterFailures failures: Int, unit: Double) -> Duration {
        let ceiling = ceiling(afterFailures: failures)
        let unit = min(max(unit, 0), 1)
        switch jitter {
        case .none: return ceiling
        case .spread(let fraction): return ceiling * (1 - fraction + 2 * fraction * unit)
        case .upperHalf: return ceiling / 2 + ceiling / 2 * unit
        }
    }

    /// The same with a random `unit`.
    public func delay(afterFailures failures: Int) -> Duration {
        delay(afterFailures: failures, unit: Double.random(in: 0...1))
    }

    /// The wait before the next attempt of a retry loop: zero for the first, then the delay
    /// after the failures so far. Counts the attempt as a failure until `reset()`.
    public mutating func next() -> Duration {
        defer { failures = min(failures + 1, Int.max - 1) }
        return delay(afterFailures: failures)
    }

    /// The wait after a failure of a call that was made at once: counts it and returns the
    /// delay after the failures so far (`initial` after the first), until `reset()`.
    public mutating func failed() -> Duration {
        failures = min(failures + 1, Int.max - 1)
        return delay(afterFailures: failures)
    }

    /// Back to an immediate first attempt (after a success, or a session that stayed up).
    public mutating func reset() { failures = 0 }
}
