/// How many handshake initiations the device takes on: a token bucket of ``burst`` tokens
/// refilled at ``perSecond``. An initiation costs a Diffie-Hellman and an AEAD open before its
/// sender is even known, and anyone who knows our public key (every DERP client: it is our
/// node key) can make valid mac1s; past the budget they are dropped before that work. Peers
/// retry a lost initiation after 5 s, so a burst of legitimate handshakes beyond it (a
/// coordinator restart) only waits.
public struct HandshakeBudget: Sendable {
    public static let burst: UInt64 = 64
    public static let perSecond: UInt64 = 64

    private var tokens = HandshakeBudget.burst
    private var refilled: WireGuardInstant?

    /// Takes a token for an initiation at `now`; false when none is left.
    mutating func take(now: WireGuardInstant) -> Bool {
        if let last = refilled {
            let elapsed = now.since(last)
            let earned = elapsed / (1_000_000_000 / Self.perSecond)
            if earned > 0 {
                tokens = min(Self.burst, tokens + min(earned, Self.burst))
                refilled = last.adding(nanoseconds: earned * (1_000_000_000 / Self.perSecond))
            }
        } else {
            refilled = now
        }
        guard tokens > 0 else { return false }
        tokens -= 1
        return true
    }
}
