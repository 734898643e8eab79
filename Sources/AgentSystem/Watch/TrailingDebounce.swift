/// A trailing debounce with a maximum wait, as a plain value: each event moves the deadline
/// to `delay` after it, but never past `delay + maxExtraWait` after the burst's first event
/// (so constant churn nearby cannot hold a change back forever); the deadline is due once
/// the clock passes it. The caller brings the time, so a test drives it with made-up
/// instants instead of sleeping.
public struct TrailingDebounce: Sendable, Equatable {
    /// The reference's quiet time before a resolve.
    public static let standardDelay: Duration = .milliseconds(250)
    /// How much longer than the quiet time a burst may be held back: a burst is due at most
    /// 1 s after its first event with the standard delay.
    public static let standardMaxExtraWait: Duration = .milliseconds(750)

    public let delay: Duration
    public let maxExtraWait: Duration
    /// When the pending burst is due; nil when nothing is pending.
    public private(set) var deadline: ContinuousClock.Instant?
    /// The latest the pending burst may be due (its first event, plus `delay` and
    /// `maxExtraWait`); nil when nothing is pending.
    public private(set) var latest: ContinuousClock.Instant?

    public init(delay: Duration = TrailingDebounce.standardDelay, maxExtraWait: Duration = TrailingDebounce.standardMaxExtraWait) {
        self.delay = delay
        self.maxExtraWait = max(maxExtraWait, .zero)
    }

    /// An event at `now`: the deadline restarts, capped by the burst's latest.
    public mutating func event(at now: ContinuousClock.Instant) {
        let latest = self.latest ?? now + delay + maxExtraWait
        self.latest = latest
        deadline = min(now + delay, latest)
    }

    /// Whether the pending burst is due at `now`; a due burst is consumed.
    public mutating func fire(at now: ContinuousClock.Instant) -> Bool {
        guard let deadline, now >= deadline else { return false }
        self.deadline = nil
        latest = nil
        return true
    }

    /// Milliseconds to wait from `now` until the deadline (rounded up), -1 when none is pending.
    public func pollTimeout(at now: ContinuousClock.Instant) -> Int32 {
        guard let deadline else { return -1 }
        let left = deadline - now
        guard left > .zero else { return 0 }
        let (seconds, attoseconds) = left.components
        let millis = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: millis)
    }
}
