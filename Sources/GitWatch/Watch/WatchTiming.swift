/// The watch socket's clock: the fallback poll, the least time between
/// two scans, and how often a poll checks fingerprints even where inotify saw nothing.
public struct WatchTiming: Sendable {
    /// The fallback tick; a tick is skipped when a scan ended less than half of it ago.
    public var poll: Duration
    /// At most one scan per `cooldown` per socket.
    public var cooldown: Duration
    /// A safety net for changes inotify cannot see (network file systems): every `verify`,
    /// a tick compares fingerprints instead of trusting the absence of events.
    public var verify: Duration

    public init(poll: Duration = .seconds(5), cooldown: Duration = .seconds(1), verify: Duration = .seconds(300)) {
        self.poll = poll
        self.cooldown = cooldown
        self.verify = verify
    }

    public static let standard = WatchTiming()
}
