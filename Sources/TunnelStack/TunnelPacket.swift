/// The parts of an incoming IPv6 packet the stack decides on before lwIP sees it (a pure
/// reading of the bytes; nil from ``parse(_:)`` for anything that is not a whole IPv6
/// packet).
struct TunnelPacket: Equatable {
    /// What follows the IPv6 header, as far as the stack cares.
    enum Transport: Equatable {
        case tcp(TCPSegment)
        /// ICMPv6 with its type (128 is an echo request).
        case icmp(type: UInt8)
        /// Any other next header (UDP, extension headers, fragments, ...).
        case other(nextHeader: UInt8)
    }

    /// A TCP header's fields (ports in host order).
    struct TCPSegment: Equatable {
        var sourcePort: UInt16
        var destinationPort: UInt16
        var sequence: UInt32
        var acknowledgment: UInt32
        var flags: UInt8
        /// Payload bytes after the header.
        var payloadLength: Int
        /// The options are well-formed (each length within the header, at least 2).
        var optionsValid: Bool

        var syn: Bool { flags & 0x02 != 0 }
        var ack: Bool { flags & 0x10 != 0 }
        var rst: Bool { flags & 0x04 != 0 }
        var fin: Bool { flags & 0x01 != 0 }
        /// Sequence space the segment occupies (payload, SYN and FIN count one each).
        var sequenceLength: UInt32 { UInt32(payloadLength) + (syn ? 1 : 0) + (fin ? 1 : 0) }
    }

    var source: TunnelAddress
    var destination: TunnelAddress
    var transport: Transport
    /// Total length the IPv6 header declares (40 + payload length).
    var length: Int

    static let headerLength = 40

    /// Reads `bytes` as one IPv6 packet; nil when it is not version 6, is shorter than its
    /// header says, or its TCP header does not fit.
    static func parse(_ bytes: UnsafeRawBufferPointer) -> TunnelPacket? {
        guard bytes.count >= headerLength, bytes[0] >> 4 == 6 else { return nil }
        let payloadLength = Int(bytes[4]) << 8 | Int(bytes[5])
        let length = headerLength + payloadLength
        guard length <= bytes.count else { return nil }
        let source = TunnelAddress(bytes: UnsafeRawBufferPointer(rebasing: bytes[8..<24]))!
        let destination = TunnelAddress(bytes: UnsafeRawBufferPointer(rebasing: bytes[24..<40]))!
        let nextHeader = bytes[6]
        let transport: Transport
        switch nextHeader {
        case 6:
            guard let segment = tcp(UnsafeRawBufferPointer(rebasing: bytes[headerLength..<length])) else { return nil }
            transport = .tcp(segment)
        case 58:
            guard payloadLength >= 4 else { return nil }
            transport = .icmp(type: bytes[headerLength])
        default:
            transport = .other(nextHeader: nextHeader)
        }
        return TunnelPacket(source: source, destination: destination, transport: transport, length: length)
    }

    private static func tcp(_ bytes: UnsafeRawBufferPointer) -> TCPSegment? {
        guard bytes.count >= 20 else { return nil }
        let headerLength = Int(bytes[12] >> 4) * 4
        guard headerLength >= 20, headerLength <= bytes.count else { return nil }
        return TCPSegment(
            sourcePort: UInt16(bytes[0]) << 8 | UInt16(bytes[1]),
            destinationPort: UInt16(bytes[2]) << 8 | UInt16(bytes[3]),
            sequence: word(bytes, 4),
            acknowledgment: word(bytes, 8),
            flags: bytes[13],
            payloadLength: bytes.count - headerLength,
            optionsValid: optionsValid(UnsafeRawBufferPointer(rebasing: bytes[20..<headerLength])))
    }

    private static func word(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt32 {
        UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }

    /// Each option is EOL (ends the list), NOP, or kind, length (2 or more), within the
    /// header. lwIP 2.1.3 reads one byte past the options on a truncated one (fixed later
    /// upstream): such segments never reach it.
    static func optionsValid(_ options: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        while index < options.count {  // bounded: every step advances index
            switch options[index] {
            case 0: return true
            case 1: index += 1
            default:
                guard index + 1 < options.count else { return false }
                let length = Int(options[index + 1])
                guard length >= 2, index + length <= options.count else { return false }
                index += length
            }
        }
        return true
    }

    /// The RST|ACK that refuses `segment` (RFC 9293 §3.10.7.1: SEQ 0, ACK = SEG.SEQ +
    /// SEG.LEN), from the address it was sent to.
    static func reset(refusing segment: TCPSegment, from local: TunnelAddress, to remote: TunnelAddress) -> [UInt8] {
        var packet = [UInt8](repeating: 0, count: headerLength + 20)
        packet[0] = 0x60
        packet[5] = 20  // payload length
        packet[6] = 6  // TCP
        packet[7] = 64  // hop limit
        packet.replaceSubrange(8..<24, with: local.bytes)
        packet.replaceSubrange(24..<40, with: remote.bytes)
        let acknowledgment = segment.sequence &+ segment.sequenceLength
        let fields: [(Int, UInt8)] = [
            (40, UInt8(segment.destinationPort >> 8)), (41, UInt8(segment.destinationPort & 0xFF)),
            (42, UInt8(segment.sourcePort >> 8)), (43, UInt8(segment.sourcePort & 0xFF)),
            (48, UInt8(acknowledgment >> 24)), (49, UInt8(acknowledgment >> 16 & 0xFF)),
            (50, UInt8(acknowledgment >> 8 & 0xFF)), (51, UInt8(acknowledgment & 0xFF)),
            (52, 5 << 4), (53, 0x14),  // data offset 5 words; RST|ACK
        ]
        for (offset, value) in fields { packet[offset] = value }
        let checksum = transportChecksum(packet)
        packet[56] = UInt8(checksum >> 8)
        packet[57] = UInt8(checksum & 0xFF)
        return packet
    }

    /// The Internet checksum of an IPv6 packet's upper-layer payload with its pseudo-header
    /// (RFC 8200 §8.1), with the checksum field counted as it stands (0 when computing;
    /// a correct packet then sums to 0).
    static func transportChecksum(_ packet: [UInt8]) -> UInt16 {
        let payloadLength = Int(packet[4]) << 8 | Int(packet[5])
        var sum: UInt32 = 0
        var index = 8
        while index < 40 {
            sum += UInt32(packet[index]) << 8 | UInt32(packet[index + 1])
            index += 2
        }
        sum += UInt32(payloadLength) + UInt32(packet[6])
        index = 40
        while index < 40 + payloadLength {
            let high = UInt32(packet[index]) << 8
            sum += index + 1 < 40 + payloadLength ? high | UInt32(packet[index + 1]) : high
            index += 2
        }
        while sum > 0xFFFF { sum = (sum & 0xFFFF) + (sum >> 16) }
        return ~UInt16(sum)
    }
}
