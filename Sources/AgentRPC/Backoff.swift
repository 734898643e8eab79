import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Reconnect delays: the reference's schedule (floor 100 ms × 1.618 per attempt, cap 10 s,
/// first attempt immediate) plus jitter, reset after a session that stayed healthy.
///
/// The reference has no jitter and never resets, so every agent retries on the same
/// 0 / 162 / 262 / 424 ms … schedule after a control-plane restart; we spread retries over
/// ±20 % of each delay.
public struct Backoff: Sendable {
    public static let floor: Duration = .milliseconds(100)
    public static let ceiling: Duration = .seconds(10)
    public static let factor = 1.618
    /// Fraction of each delay randomised either way.
    public static let jitter = 0.2

    private var attempt = 0

    public init() {}

    /// The wait before the next attempt (zero for the first).
    public mutating func next<G: RandomNumberGenerator>(using generator: inout G) -> Duration {
        defer { attempt += 1 }
        return Self.delay(attempt: attempt, jitter: Double.random(in: -Self.jitter...Self.jitter, using: &generator))
    }

    public mutating func next() -> Duration {
        var generator = SystemRandomNumberGenerator()
        return next(using: &generator)
    }

    /// Back to an immediate first attempt.
    public mutating func reset() { attempt = 0 }

    /// Attempt 0 is immediate; attempt n waits min(100 ms × 1.618^n, 10 s), scaled by 1 + jitter.
    public static func delay(attempt: Int, jitter: Double = 0) -> Duration {
        guard attempt > 0 else { return .zero }
        let base = 0.1 * pow(factor, Double(attempt))
        let seconds = min(base, 10.0) * (1 + jitter)
        return .nanoseconds(Int64(seconds * 1e9))
    }
}
