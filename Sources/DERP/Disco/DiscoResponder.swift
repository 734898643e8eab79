/// Answers disco Pings that arrive over DERP (what makes `coder ping` succeed against a
/// DERP-only agent): hand it every received packet; it consumes disco ones.
public struct DiscoResponder: Sendable {
    /// Our disco key.
    public let privateKey: X25519PrivateKey
    /// The home region: the Pong's source port.
    public let regionID: Int

    /// A responder for our disco key, answering for home region `regionID`.
    public init(privateKey: X25519PrivateKey, regionID: Int) {
        self.privateKey = privateKey
        self.regionID = regionID
    }

    /// Our key as the Node's `disco` text.
    public var keyText: String { Disco.keyText(privateKey.publicKey) }

    /// True when `packet` was a disco message (answered with a Pong through `client` if
    /// it was a Ping for us; dropped otherwise); false for anything else (WireGuard).
    public func handle(_ packet: DERPReceivedPacket, via client: DERPClient) -> Bool {
        guard Disco.looksLikeDisco(packet.packet) else { return false }
        if let received = try? Disco.open(packet.packet, privateKey: privateKey),
            let pong = Disco.pong(answering: received, privateKey: privateKey, regionID: regionID)
        {
            client.send(to: packet.source, packet: pong)
        }
        return true
    }
}
