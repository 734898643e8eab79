/// What the owner can read about a peer.
public struct WireGuardPeerStatus: Sendable, Equatable {
    /// When the last handshake completed (initiator: response consumed; responder: first
    /// transport message received), on the owner's clock.
    public var lastHandshake: WireGuardInstant?
    /// The timestamp of the last initiation accepted from the peer.
    public var lastInitiationTimestamp: TAI64N?
    /// True when a session can send now.
    public var hasSendableSession: Bool
    /// Packets waiting for a handshake.
    public var queuedPackets: Int
    /// Transport bytes received from the peer (on the wire).
    public var receivedBytes: UInt64
    /// Transport bytes sent to the peer (on the wire).
    public var sentBytes: UInt64
}
