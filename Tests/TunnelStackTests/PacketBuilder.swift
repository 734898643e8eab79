@testable import TunnelStack

/// IPv6 packets built by hand for the tests that talk to the stack directly.
enum PacketBuilder {
    /// A TCP segment from `source`:`sourcePort` to `destination`:`destinationPort`.
    static func tcp(
        from source: TunnelAddress, _ sourcePort: UInt16, to destination: TunnelAddress, _ destinationPort: UInt16,
        sequence: UInt32, acknowledgment: UInt32 = 0, flags: UInt8, options: [UInt8] = [], payload: [UInt8] = []
    ) -> [UInt8] {
        var tcp = [UInt8](repeating: 0, count: 20)
        tcp[0] = UInt8(sourcePort >> 8)
        tcp[1] = UInt8(sourcePort & 0xFF)
        tcp[2] = UInt8(destinationPort >> 8)
        tcp[3] = UInt8(destinationPort & 0xFF)
        for index in 0..<4 {
            tcp[4 + index] = UInt8(truncatingIfNeeded: sequence >> (24 - 8 * index))
            tcp[8 + index] = UInt8(truncatingIfNeeded: acknowledgment >> (24 - 8 * index))
        }
        let header = 20 + (options.count + 3) / 4 * 4
        tcp[12] = UInt8(header / 4) << 4
        tcp[13] = flags
        tcp[14] = 0xFF
        tcp[15] = 0xFF
        tcp += options + [UInt8](repeating: 0, count: header - 20 - options.count) + payload
        return seal(ipv6(from: source, to: destination, nextHeader: 6, payload: tcp), checksumAt: 40 + 16)
    }

    /// An ICMPv6 echo request.
    static func echoRequest(from source: TunnelAddress, to destination: TunnelAddress, identifier: UInt16, data: [UInt8]) -> [UInt8] {
        let icmp: [UInt8] = [128, 0, 0, 0, UInt8(identifier >> 8), UInt8(identifier & 0xFF), 0, 1] + data
        return seal(ipv6(from: source, to: destination, nextHeader: 58, payload: icmp), checksumAt: 40 + 2)
    }

    /// A UDP datagram with a correct length field and checksum (0 is sent as 0xFFFF).
    static func udp(
        from source: TunnelAddress, _ sourcePort: UInt16, to destination: TunnelAddress, _ destinationPort: UInt16,
        payload: [UInt8]
    ) -> [UInt8] {
        let length = 8 + payload.count
        let udp: [UInt8] =
            [
                UInt8(sourcePort >> 8), UInt8(sourcePort & 0xFF), UInt8(destinationPort >> 8), UInt8(destinationPort & 0xFF),
                UInt8(length >> 8), UInt8(length & 0xFF), 0, 0,
            ] + payload
        var packet = seal(ipv6(from: source, to: destination, nextHeader: 17, payload: udp), checksumAt: 40 + 6)
        if packet[46] == 0, packet[47] == 0 { (packet[46], packet[47]) = (0xFF, 0xFF) }
        return packet
    }

    /// The UDP fields of `packet` (40-byte header, no extensions): ports, length field,
    /// checksum field and payload.
    static func udpFields(of packet: [UInt8]) -> (sourcePort: UInt16, destinationPort: UInt16, length: Int, checksum: UInt16, payload: [UInt8])? {
        guard packet.count >= 48, packet[6] == 17 else { return nil }
        func half(_ offset: Int) -> UInt16 { UInt16(packet[offset]) << 8 | UInt16(packet[offset + 1]) }
        return (half(40), half(42), Int(half(44)), half(46), Array(packet[48...]))
    }

    static func ipv6(from source: TunnelAddress, to destination: TunnelAddress, nextHeader: UInt8, payload: [UInt8]) -> [UInt8] {
        var packet: [UInt8] = [0x60, 0, 0, 0, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF), nextHeader, 64]
        packet += source.bytes + destination.bytes + payload
        return packet
    }

    private static func seal(_ packet: [UInt8], checksumAt offset: Int) -> [UInt8] {
        var packet = packet
        let checksum = TunnelPacket.transportChecksum(packet)
        packet[offset] = UInt8(checksum >> 8)
        packet[offset + 1] = UInt8(checksum & 0xFF)
        return packet
    }

    /// The MSS option's value in a TCP segment of `packet`, if it has one.
    static func mss(of packet: [UInt8]) -> UInt16? {
        let header = Int(packet[40 + 12] >> 4) * 4
        var index = 40 + 20
        while index < 40 + header {  // bounded by the header
            switch packet[index] {
            case 0: return nil
            case 1: index += 1
            case 2: return UInt16(packet[index + 2]) << 8 | UInt16(packet[index + 3])
            default: index += max(2, Int(packet[index + 1]))
            }
        }
        return nil
    }
}
