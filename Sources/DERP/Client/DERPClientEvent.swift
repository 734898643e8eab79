/// What a ``DERPClient`` tells its owner, in order, through ``DERPClient/events``.
public enum DERPClientEvent: Equatable, Sendable {
    /// A connection finished its handshake: the owner re-sends its node (the home region
    /// and `derp_forced_websocket` come from here).
    case connected(regionID: Int, transport: DERPTransport)
    /// The connection ended (the client reconnects unless closed).
    case disconnected(reason: String)
    /// The relay says a peer left (reason 0: it had sent to us and disconnected; 1: not
    /// connected to this relay).
    case peerGone(X25519PublicKey, reason: UInt8)
    /// The relay's health text changed (nil: healthy).
    case health(String?)
    /// The relay announced a restart: reconnect after `reconnectIn`, keep trying for `tryFor`.
    case restarting(reconnectIn: Duration, tryFor: Duration)
}
