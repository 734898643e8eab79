/// What a connection reports to its client, on the connection's event loop (must not block).
protocol DERPConnectionDelegate: AnyObject, Sendable {
    /// A RecvPacket.
    func received(_ packet: DERPReceivedPacket)
    /// A PeerGone.
    func peerGone(_ key: X25519PublicKey, reason: UInt8)
    /// A Health frame (empty text: healthy).
    func health(_ text: String)
    /// A Restarting frame.
    func restarting(reconnectIn: UInt32, tryFor: UInt32)
}
