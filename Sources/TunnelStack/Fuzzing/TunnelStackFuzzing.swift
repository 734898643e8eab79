/// The tunnel stack's helpers for the fuzz targets (`Fuzz/`, `make fuzz`): packets whose
/// checksums hold (so that they get past lwIP's checks) and checks of what the stack sends.
/// It exists for the fuzz targets only.
public enum TunnelStackFuzzing {
    /// `packet` (an IPv6 header and a TCP, UDP or ICMPv6 payload) with its payload length
    /// (and a UDP length field) set from its size and its checksum computed; other packets
    /// only get the length.
    public static func sealed(_ packet: [UInt8]) -> [UInt8] {
        guard packet.count >= 40, packet.count - 40 <= 0xFFFF else { return packet }
        var packet = packet
        let payload = packet.count - 40
        packet[4] = UInt8(payload >> 8)
        packet[5] = UInt8(payload & 0xFF)
        guard let offset = checksumOffset(packet) else { return packet }
        if packet[6] == 17 {
            packet[44] = packet[4]
            packet[45] = packet[5]
        }
        packet[offset] = 0
        packet[offset + 1] = 0
        var checksum = TunnelPacket.transportChecksum(packet)
        if checksum == 0, packet[6] == 17 { checksum = 0xFFFF }  // UDP's 0 means none
        packet[offset] = UInt8(checksum >> 8)
        packet[offset + 1] = UInt8(checksum & 0xFF)
        return packet
    }

    /// True when `packet` is a TCP, UDP or ICMPv6 packet whose checksum holds.
    public static func checksumValid(_ packet: [UInt8]) -> Bool {
        checksumOffset(packet) != nil && TunnelPacket.transportChecksum(packet) == 0
    }

    /// The MSS option of a TCP SYN in `packet`, if any.
    public static func synMSS(_ packet: [UInt8]) -> UInt16? {
        guard packet.count >= 60, packet[6] == 6, packet[53] & 0x02 != 0 else { return nil }
        let header = Int(packet[52] >> 4) * 4
        var index = 60
        while index + 1 < min(40 + header, packet.count) {  // bounded by the header
            switch packet[index] {
            case 0: return nil
            case 1: index += 1
            case 2: return index + 3 < packet.count ? UInt16(packet[index + 2]) << 8 | UInt16(packet[index + 3]) : nil
            default: index += max(2, Int(packet[index + 1]))
            }
        }
        return nil
    }

    private static func checksumOffset(_ packet: [UInt8]) -> Int? {
        guard packet.count >= 40 else { return nil }
        switch packet[6] {
        case 6: return packet.count >= 60 ? 56 : nil
        case 17: return packet.count >= 48 ? 46 : nil
        case 58: return packet.count >= 44 ? 42 : nil
        default: return nil
        }
    }
}
