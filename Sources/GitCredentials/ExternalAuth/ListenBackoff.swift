/// The waits between `listen=true` polls while the user authenticates in a browser: the first
/// at once, then 250 ms doubling to at most 10 s (the reference's `retry.New(250ms, 10s)`).
public struct ListenBackoff: Sendable, Equatable {
    public static let floor: Duration = .milliseconds(250)
    public static let ceiling: Duration = .seconds(10)

    private var attempts = 0

    public init() {}

    /// How long to wait before the next poll.
    public mutating func next() -> Duration {
        defer { attempts += 1 }
        guard attempts > 0 else { return .zero }
        var wait = Self.floor
        for _ in 1..<min(attempts, 16) where wait < Self.ceiling { wait *= 2 }
        return min(wait, Self.ceiling)
    }
}
