/// A token bucket on a clock the caller passes in (sans-IO, so tests drive it by hand):
/// at most ``capacity`` tokens, refilled at ``perSecond``. ``spend(_:now:)`` may go into
/// debt (for bytes already read); ``take(_:now:)`` only takes what is there.
public struct TokenBucket: Sendable {
    public let capacity: Double
    public let perSecond: Double
    public private(set) var tokens: Double
    private var refilledAt: ContinuousClock.Instant

    /// A full bucket at `now`.
    public init(capacity: Double, perSecond: Double, now: ContinuousClock.Instant) {
        self.capacity = capacity
        self.perSecond = perSecond
        tokens = capacity
        refilledAt = now
    }

    /// Adds what accrued since the last refill (never past ``capacity``).
    public mutating func refill(now: ContinuousClock.Instant) {
        guard now > refilledAt else { return }
        tokens = min(capacity, tokens + (now - refilledAt).inSeconds * perSecond)
        refilledAt = now
    }

    /// Takes `count` tokens when there are that many; false (and nothing taken) otherwise.
    public mutating func take(_ count: Double = 1, now: ContinuousClock.Instant) -> Bool {
        refill(now: now)
        guard tokens >= count else { return false }
        tokens -= count
        return true
    }

    /// Takes `count` tokens, into debt if need be (at most one ``capacity`` of it).
    public mutating func spend(_ count: Double, now: ContinuousClock.Instant) {
        refill(now: now)
        tokens = max(-capacity, tokens - count)
    }

    /// When the bucket holds at least `count` tokens (`now` or earlier when it already does).
    public func readyAt(_ count: Double, now: ContinuousClock.Instant) -> ContinuousClock.Instant {
        var copy = self
        copy.refill(now: now)
        guard copy.tokens < count, perSecond > 0 else { return now }
        return now + .seconds((min(count, capacity) - copy.tokens) / perSecond)
    }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    public var inSeconds: Double {
        let (whole, attoseconds) = components
        return Double(whole) + Double(attoseconds) / 1e18
    }
}
