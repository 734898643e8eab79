import DERP

/// Which of two confirmed addresses of a peer is the better path (magicsock's
/// `betterAddr`): latency points, then a bonus for loopback, private and IPv6 addresses,
/// with a 1 % hysteresis so the current path is not replaced for noise.
enum AddressScore {
    /// True when `a` (with its pong latency in nanoseconds) should replace `b`.
    static func isBetter(_ a: (DiscoEndpoint, UInt64), than b: (DiscoEndpoint, UInt64)?) -> Bool {
        guard let b else { return true }
        if a.0 == b.0 { return false }
        var aPoints = 0
        var bPoints = 0
        if a.1 > 0, b.1 > 0, a.1 != b.1 {
            let (fast, slow) = a.1 < b.1 ? (a.1, b.1) : (b.1, a.1)
            let points = 100 - Int(100 * fast / slow)
            if a.1 < b.1 { aPoints += points } else { bPoints += points }
        }
        aPoints += bonus(a.0)
        bPoints += bonus(b.0)
        if aPoints <= 1, bPoints == 0 { return false }
        return aPoints > bPoints
    }

    private static func bonus(_ endpoint: DiscoEndpoint) -> Int {
        var points = endpoint.isLoopback ? 50 : endpoint.isPrivate ? 20 : 0
        if !endpoint.isIPv4 { points += 10 }
        return points
    }
}
