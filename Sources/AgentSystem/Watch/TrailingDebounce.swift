/// A trailing debounce as a plain value: each event moves the deadline to `delay` after it,
/// and the deadline is due once the clock passes it with no later event. The caller brings
/// the time, so a test drives it with made-up instants instead of sleeping.
public struct TrailingDebounce: Sendable, Equatable {
    /// The reference's quiet time before a resolve.
    public static let standardDelay: Duration = .milliseconds(250)

    public let delay: Duration
    /// When the pending burst is due; nil when nothing is pending.
    public private(set) var deadline: ContinuousClock.Instant?

    public init(delay: Duration = TrailingDebounce.standardDelay) {
        self.delay = delay
    }

    /// An event at `now`: the deadline restarts.
    public mutating func event(at now: ContinuousClock.Instant) {
        deadline = now + delay
    }

    /// Whether the pending burst is due at `now`; a due burst is consumed.
    public mutating func fire(at now: ContinuousClock.Instant) -> Bool {
        guard let deadline, now >= deadline else { return false }
        self.deadline = nil
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
