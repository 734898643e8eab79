/// A packet the relay delivered: who sent it (their node key) and its bytes.
public struct DERPReceivedPacket: Equatable, Sendable {
    public var source: X25519PublicKey
    public var packet: [UInt8]

    public init(source: X25519PublicKey, packet: [UInt8]) {
        self.source = source
        self.packet = packet
    }
}
