/// A sink that copies everything into arrays (tests, simple owners).
public struct WireGuardCollectingSink: WireGuardSink, Sendable {
    /// Messages to send, in order.
    public var datagrams: [(peer: WireGuardPublicKey, bytes: [UInt8])] = []
    /// Packets delivered, in order.
    public var packets: [(peer: WireGuardPublicKey, bytes: [UInt8])] = []

    /// An empty sink.
    public init() {}

    /// Copies the datagram.
    public mutating func send(_ datagram: UnsafeRawBufferPointer, to peer: WireGuardPublicKey) {
        datagrams.append((peer, Array(datagram)))
    }

    /// Copies the packet.
    public mutating func deliver(_ packet: UnsafeRawBufferPointer, from peer: WireGuardPublicKey) {
        packets.append((peer, Array(packet)))
    }
}
