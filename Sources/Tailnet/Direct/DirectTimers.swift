import WireGuard

/// The timers of the direct-path logic (magicsock's constants), in nanoseconds.
enum DirectTimers {
    static let second: UInt64 = 1_000_000_000
    /// Heartbeat: ping the best address, check whether a full round is due.
    static let heartbeatInterval: UInt64 = 3 * second
    /// UDP alone for this long after a pong from the best address.
    static let trustUDPAddr: UInt64 = 6_500_000_000
    /// Heartbeats, periodic STUN and ping-learned candidates stop after this idle time.
    static let sessionActiveTimeout: UInt64 = 45 * second
    /// A full round when the best address is slower than ``goodEnoughLatency``.
    static let upgradeInterval: UInt64 = 60 * second
    /// No upgrade rounds at or below this latency.
    static let goodEnoughLatency: UInt64 = 5_000_000
    /// An outstanding ping is forgotten after this.
    static let pingTimeout: UInt64 = 5 * second
    /// Minimum gap between pings to one address (reset by CallMeMaybe).
    static let discoPingInterval: UInt64 = 5 * second
    /// Older endpoints are re-STUNed before a CallMeMaybe.
    static let endpointsFreshEnough: UInt64 = 27 * second
    /// STUN and port-mapped endpoints stay advertised this long after last seen.
    static let endpointTrackerLifetime: UInt64 = 310 * second
    /// A STUN report gets this long in total.
    static let netcheckBudget: UInt64 = 2 * second
    /// Periodic re-STUN: a random delay in this range after every report.
    static let reSTUNMinimum: UInt64 = 20 * second
    static let reSTUNMaximum: UInt64 = 26 * second

    /// The earlier of two deadlines, either of which may be absent: the per-packet timer
    /// checks fold with it instead of building an array.
    static func earliest(_ a: WireGuardInstant?, _ b: WireGuardInstant?) -> WireGuardInstant? {
        guard let a else { return b }
        guard let b else { return a }
        return min(a, b)
    }
}
