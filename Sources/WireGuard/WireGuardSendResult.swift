/// What `WireGuardDevice.send` did with an outbound IP packet.
public enum WireGuardSendResult: Equatable, Sendable {
    /// Encrypted and handed to the sink for this peer.
    case sent(WireGuardPublicKey)
    /// Waiting for a handshake with this peer (an initiation went out if none was recent).
    case queued(WireGuardPublicKey)
    /// Dropped (and counted).
    case dropped(WireGuardDropReason)
}
