/// The parts of an incoming IPv6 packet the stack decides on before lwIP sees it (a pure
/// reading of the bytes; nil from ``parse(_:)`` for anything that is not a whole IPv6
/// packet).
struct TunnelPacket: Equatable {
    /// What follows the IPv6 header, as far as the stack cares.
    enum Transport: Equatable {
        case tcp(TCPSegment)
        /// ICMPv6 with its type (128 is an echo request).
        case icmp(type: UInt8)
        /// UDP whose length field fits the packet and whose checksum holds.
        case udp(UDPDatagram)
        /// UDP shorter than its header, with a length field outside 8...payload, or with a
        /// wrong or zero checksum (IPv6 requires one: RFC 8200 §8.1).
        case malformedUDP
        /// Any other next header (extension headers, fragments, ...).
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

    /// A UDP header's ports (host order) and where its payload lies in the packet.
    struct UDPDatagram: Equatable {
        var sourcePort: UInt16
        var destinationPort: UInt16
        /// Offsets in the packet: from the end of the UDP header to the end the UDP length
        /// field gives (bytes after it, within the IPv6 payload, are ignored).
        var payload: Range<Int>
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
        case 17:
            transport = udp(bytes, payloadLength: payloadLength)
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

    static let udpHeaderLength = 8

    /// The UDP datagram after the IPv6 header, checked as gVisor does: the length field
    /// within 8...(IPv6 payload length) and the checksum, over the length field's bytes.
    private static func udp(_ bytes: UnsafeRawBufferPointer, payloadLength: Int) -> Transport {
        guard payloadLength >= udpHeaderLength else { return .malformedUDP }
        let udpLength = Int(bytes[headerLength + 4]) << 8 | Int(bytes[headerLength + 5])
        guard udpLength >= udpHeaderLength, udpLength <= payloadLength else { return .malformedUDP }
        let checksumField = UInt16(bytes[headerLength + 6]) << 8 | UInt16(bytes[headerLength + 7])
        let upper = UnsafeRawBufferPointer(rebasing: bytes[headerLength..<(headerLength + udpLength)])
        let source = UnsafeRawBufferPointer(rebasing: bytes[8..<24])
        let destination = UnsafeRawBufferPointer(rebasing: bytes[24..<40])
        guard checksumField != 0, checksum(source: source, destination: destination, nextHeader: 17, upper) == 0 else {
            return .malformedUDP
        }
        return .udp(
            UDPDatagram(
                sourcePort: UInt16(bytes[headerLength]) << 8 | UInt16(bytes[headerLength + 1]),
                destinationPort: UInt16(bytes[headerLength + 2]) << 8 | UInt16(bytes[headerLength + 3]),
                payload: (headerLength + udpHeaderLength)..<(headerLength + udpLength)))
    }

    /// An IPv6/UDP packet from `source`:`sourcePort` to `destination`:`destinationPort`
    /// carrying `payload`, with its checksum (0 is sent as 0xFFFF, RFC 768).
    static func udp(
        from source: TunnelAddress, _ sourcePort: UInt16, to destination: TunnelAddress, _ destinationPort: UInt16,
        payload: UnsafeRawBufferPointer
    ) -> [UInt8] {
        let udpLength = udpHeaderLength + payload.count
        precondition(udpLength <= 0xFFFF, "a UDP datagram of \(udpLength) bytes")
        var packet = [UInt8](repeating: 0, count: headerLength + udpLength)
        let header: [UInt8] = [
            0x60, 0, 0, 0, UInt8(udpLength >> 8), UInt8(udpLength & 0xFF), 17, 64,
        ]
        packet.replaceSubrange(0..<8, with: header)
        packet.replaceSubrange(8..<24, with: source.bytes)
        packet.replaceSubrange(24..<40, with: destination.bytes)
        let fields: [UInt8] = [
            UInt8(sourcePort >> 8), UInt8(sourcePort & 0xFF), UInt8(destinationPort >> 8), UInt8(destinationPort & 0xFF),
            UInt8(udpLength >> 8), UInt8(udpLength & 0xFF),
        ]
        packet.replaceSubrange(40..<46, with: fields)
        packet.withUnsafeMutableBytes { bytes in
            if let base = payload.baseAddress, payload.count > 0 {
                bytes.baseAddress!.advanced(by: headerLength + udpHeaderLength).copyMemory(from: base, byteCount: payload.count)
            }
            var sum = checksum(
                source: UnsafeRawBufferPointer(rebasing: bytes[8..<24]), destination: UnsafeRawBufferPointer(rebasing: bytes[24..<40]),
                nextHeader: 17, UnsafeRawBufferPointer(rebasing: bytes[headerLength...]))
            if sum == 0 { sum = 0xFFFF }
            bytes[46] = UInt8(sum >> 8)
            bytes[47] = UInt8(sum & 0xFF)
        }
        return packet
    }

    /// The Internet checksum of an upper-layer packet (`upper`, checksum field as it stands)
    /// with the IPv6 pseudo-header of its length (RFC 8200 §8.1).
    static func checksum(
        source: UnsafeRawBufferPointer, destination: UnsafeRawBufferPointer, nextHeader: UInt8, _ upper: UnsafeRawBufferPointer
    ) -> UInt16 {
        var sum: UInt64 = UInt64(upper.count) + UInt64(nextHeader)
        for address in [source, destination] {
            var index = 0
            while index < 16 {
                sum += UInt64(address[index]) << 8 | UInt64(address[index + 1])
                index += 2
            }
        }
        var index = 0
        while index + 1 < upper.count {
            sum += UInt64(upper[index]) << 8 | UInt64(upper[index + 1])
            index += 2
        }
        if index < upper.count { sum += UInt64(upper[index]) << 8 }
        while sum > 0xFFFF { sum = (sum & 0xFFFF) + (sum >> 16) }
        return ~UInt16(sum)
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
