/// How many handshake initiations a sender gets taken on: a token bucket of `burst` tokens
/// refilled at `perSecond`. An initiation costs a Diffie-Hellman and an AEAD open before its
/// sender is even known, and anyone who knows our public key (every DERP client: it is our
/// node key) can make valid mac1s; past the budget they are dropped before that work. Peers
/// retry a lost initiation after 5 s, so a burst of legitimate handshakes beyond it (a
/// coordinator restart) only waits.
///
/// The device keeps one per configured peer, for initiations whose authenticated source (the
/// DERP sender's key, a disco-verified UDP address) is that peer (``perPeer``), and one for
/// everything else (``strangers``), so a flood from keys we do not know never starves a peer.
public struct HandshakeBudget: Sendable {
    /// wireguard-go's per-address limit: 20 a second, a burst of 5.
    public static let perPeer = HandshakeBudget(burst: 5, perSecond: 20)
    /// All initiations whose source is not a configured peer, together.
    public static let strangers = HandshakeBudget(burst: 64, perSecond: 64)

    public let burst: UInt64
    public let perSecond: UInt64
    private var tokens: UInt64
    private var refilled: WireGuardInstant?

    init(burst: UInt64, perSecond: UInt64) {
        precondition(burst > 0 && perSecond > 0 && perSecond <= 1_000_000_000)
        self.burst = burst
        self.perSecond = perSecond
        tokens = burst
    }

    /// Takes a token for an initiation at `now`; false when none is left.
    mutating func take(now: WireGuardInstant) -> Bool {
        let interval = 1_000_000_000 / perSecond
        if let last = refilled {
            let earned = now.since(last) / interval
            if earned > 0 {
                tokens = min(burst, tokens + min(earned, burst))
                refilled = last.adding(nanoseconds: earned * interval)
            }
        } else {
            refilled = now
        }
        guard tokens > 0 else { return false }
        tokens -= 1
        return true
    }
}
