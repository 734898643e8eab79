/// Tailscale's TSMP (IP protocol 99) as the agent needs it: the answer to a ping.
///
/// A ping is an IPv6 packet with next header 99 and a 9-byte payload: `p` (0x70) and 8
/// bytes of data. The pong swaps the addresses, keeps next header 99, sets hop limit 64 and
/// carries 11 bytes: `o` (0x6F), the same 8 bytes, and the peer-API port 0 (2 bytes BE).
public enum TSMP {
    /// IP protocol number 99.
    public static let ipProtocol: UInt8 = 99
    /// The hop limit of answers.
    public static let hopLimit: UInt8 = 64
    static let pingType = UInt8(ascii: "p")
    static let pongType = UInt8(ascii: "o")

    /// The pong for a TSMP ping; nil for anything else (IPv4, another protocol, another TSMP
    /// type, a short or malformed packet).
    public static func pong(answering packet: [UInt8]) -> [UInt8]? {
        packet.withUnsafeBytes { pong(answering: $0) }
    }

    /// The pong for a TSMP ping held in `packet`; nil for anything else.
    public static func pong(answering packet: UnsafeRawBufferPointer) -> [UInt8]? {
        guard let view = IPPacketView(packet), view.version == 6, view.nextHeader == ipProtocol,
            view.payloadLength >= 9, packet[view.headerLength] == pingType
        else { return nil }
        let header = IPPacketView.ipv6HeaderLength
        var out = [UInt8](repeating: 0, count: header + 11)
        out[0] = 0x60
        out[5] = 11
        out[6] = ipProtocol
        out[7] = hopLimit
        for i in 0..<16 {
            out[8 + i] = packet[24 + i]
            out[24 + i] = packet[8 + i]
        }
        out[header] = pongType
        for i in 0..<8 { out[header + 1 + i] = packet[header + 1 + i] }
        // Bytes header+9 and header+10: the peer-API port, 0.
        return out
    }
}
