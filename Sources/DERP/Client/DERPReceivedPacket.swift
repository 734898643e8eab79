/// A packet the relay delivered: who sent it (their node key) and its bytes.
public struct DERPReceivedPacket: Equatable, Sendable {
    /// The sender's node key.
    public var source: X25519PublicKey
    /// The packet (WireGuard or disco).
    public var packet: [UInt8]

    /// A packet from `source`.
    public init(source: X25519PublicKey, packet: [UInt8]) {
        self.source = source
        self.packet = packet
    }
}
