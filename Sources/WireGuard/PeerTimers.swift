/// One peer's timers as deadlines on the owner's clock (wireguard-go's timers.go); nil is
/// "not armed". The device fires those that are due in `tick`.
struct PeerTimers: Sendable {
    var retransmitHandshake: WireGuardInstant?
    var sendKeepalive: WireGuardInstant?
    var newHandshake: WireGuardInstant?
    var zeroKeyMaterial: WireGuardInstant?
    var persistentKeepalive: WireGuardInstant?
    var needAnotherKeepalive = false
    var handshakeAttempts = 0
    var sentLastMinuteHandshake = false

    /// The earliest armed deadline.
    var earliest: WireGuardInstant? {
        // No array: the owner asks after every packet.
        let first = Self.earlier(retransmitHandshake, sendKeepalive)
        let second = Self.earlier(newHandshake, zeroKeyMaterial)
        return Self.earlier(Self.earlier(first, second), persistentKeepalive)
    }

    static func earlier(_ a: WireGuardInstant?, _ b: WireGuardInstant?) -> WireGuardInstant? {
        guard let a else { return b }
        guard let b else { return a }
        return min(a, b)
    }
}
