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
        var best: WireGuardInstant?
        for deadline in [retransmitHandshake, sendKeepalive, newHandshake, zeroKeyMaterial, persistentKeepalive] {
            if let deadline, best.map({ deadline < $0 }) ?? true { best = deadline }
        }
        return best
    }
}
