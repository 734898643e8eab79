/// A peer as the owner configures it (from the coordinator's Node): its key, the addresses
/// it may use, and an optional persistent keepalive.
public struct WireGuardPeerConfiguration: Sendable, Equatable {
    /// The peer's static public key (its node key).
    public var publicKey: WireGuardPublicKey
    /// The prefixes routed to the peer and accepted as sources from it.
    public var allowedIPs: [IPPrefix]
    /// Seconds between keepalives sent whatever the traffic; 0 = off (tailscale uses 25).
    public var persistentKeepaliveSeconds: UInt64

    /// A peer configuration.
    public init(publicKey: WireGuardPublicKey, allowedIPs: [IPPrefix], persistentKeepaliveSeconds: UInt64 = 0) {
        self.publicKey = publicKey
        self.allowedIPs = allowedIPs
        self.persistentKeepaliveSeconds = persistentKeepaliveSeconds
    }
}
