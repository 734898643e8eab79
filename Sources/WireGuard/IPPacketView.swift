/// A validated view of an IP packet's header (IPv6 or IPv4): version, addresses, next
/// header / protocol, and the packet's real length (which may be shorter than the buffer:
/// WireGuard pads plaintext with zeros). Nil for anything malformed.
public struct IPPacketView: Sendable, Equatable {
    /// 6 or 4.
    public let version: Int
    /// The source address.
    public let source: IPAddress
    /// The destination address.
    public let destination: IPAddress
    /// IPv6 next header or IPv4 protocol.
    public let nextHeader: UInt8
    /// Where the payload starts (40 for IPv6; the IHL for IPv4).
    public let headerLength: Int
    /// The whole packet's length per its header (≤ the buffer's length).
    public let totalLength: Int
    /// IPv6 hop limit or IPv4 TTL.
    public let hopLimit: UInt8

    /// The IPv6 fixed header's length.
    public static let ipv6HeaderLength = 40
    /// The IPv4 minimum header's length.
    public static let ipv4HeaderLength = 20

    /// Validates the header at the start of `packet`.
    public init?(_ packet: UnsafeRawBufferPointer) {
        guard packet.count >= 1 else { return nil }
        switch packet[0] >> 4 {
        case 6:
            guard packet.count >= IPPacketView.ipv6HeaderLength else { return nil }
            let payload = Int(packet[4]) << 8 | Int(packet[5])
            guard IPPacketView.ipv6HeaderLength + payload <= packet.count else { return nil }
            version = 6
            nextHeader = packet[6]
            hopLimit = packet[7]
            source = IPAddress(reading: packet, at: 8, isIPv6: true)
            destination = IPAddress(reading: packet, at: 24, isIPv6: true)
            headerLength = IPPacketView.ipv6HeaderLength
            totalLength = IPPacketView.ipv6HeaderLength + payload
        case 4:
            guard packet.count >= IPPacketView.ipv4HeaderLength else { return nil }
            let ihl = Int(packet[0] & 0x0f) * 4
            let total = Int(packet[2]) << 8 | Int(packet[3])
            guard ihl >= IPPacketView.ipv4HeaderLength, total >= ihl, total <= packet.count else { return nil }
            version = 4
            nextHeader = packet[9]
            hopLimit = packet[8]
            source = IPAddress(reading: packet, at: 12, isIPv6: false)
            destination = IPAddress(reading: packet, at: 16, isIPv6: false)
            headerLength = ihl
            totalLength = total
        default:
            return nil
        }
    }

    /// Validates the header at the start of `packet`.
    public init?(_ packet: [UInt8]) {
        guard let view = packet.withUnsafeBytes({ IPPacketView($0) }) else { return nil }
        self = view
    }

    /// The payload's length (after the fixed header; IPv6 extension headers are payload).
    public var payloadLength: Int { totalLength - headerLength }
}
