/// STUN binding requests and responses as Tailscale's netcheck sends and reads them
/// (RFC 5389 subset): a 40-byte request with SOFTWARE `tailnode` and FINGERPRINT, and the
/// mapped address of a success response.
public enum STUN {
    /// `21 12 A4 42`.
    public static let magicCookie: [UInt8] = [0x21, 0x12, 0xA4, 0x42]
    /// Length of a transaction ID.
    public static let txIDLength = 12
    static let headerLength = 20
    static let bindingRequest: UInt16 = 0x0001
    static let bindingSuccess: UInt16 = 0x0101
    static let attributeSoftware: UInt16 = 0x8022
    static let attributeFingerprint: UInt16 = 0x8028
    static let attributeXORMappedAddress: UInt16 = 0x0020
    static let attributeXORMappedAddressAlt: UInt16 = 0x8020
    static let attributeMappedAddress: UInt16 = 0x0001
    static let fingerprintXOR: UInt32 = 0x5354_554E
    /// At most this many attributes are read from one response (the datagram bounds it too).
    static let maxAttributes = 64

    /// True when `packet` looks like STUN (the demultiplexer's first rule): at least a header,
    /// the two top bits zero, the magic cookie at bytes 4–7.
    public static func looksLikeSTUN(_ packet: some Collection<UInt8>) -> Bool {
        guard packet.count >= headerLength else { return false }
        var iterator = packet.makeIterator()
        guard let first = iterator.next(), first & 0xC0 == 0 else { return false }
        _ = iterator.next(); _ = iterator.next(); _ = iterator.next()
        for byte in magicCookie where iterator.next() != byte { return false }
        return true
    }

    /// The 40-byte binding request for `txID` (12 bytes).
    public static func request(txID: [UInt8]) -> [UInt8] {
        precondition(txID.count == txIDLength, "a STUN transaction ID is 12 bytes")
        var bytes: [UInt8] = [0x00, 0x01, 0x00, 0x14] + magicCookie + txID
        bytes += [0x80, 0x22, 0x00, 0x08] + Array("tailnode".utf8)
        // Over the message before the FINGERPRINT attribute (bytes 0–31).
        let fingerprint = CRC32.checksum(bytes) ^ fingerprintXOR
        bytes += [0x80, 0x28, 0x00, 0x04]
        bytes += [UInt8(fingerprint >> 24), UInt8(fingerprint >> 16 & 0xff), UInt8(fingerprint >> 8 & 0xff), UInt8(fingerprint & 0xff)]
        return bytes
    }

    /// A binding success response: its transaction ID and the mapped address.
    public struct Response: Equatable, Sendable {
        public var txID: [UInt8]
        public var mapped: DiscoEndpoint

        public init(txID: [UInt8], mapped: DiscoEndpoint) {
            self.txID = txID
            self.mapped = mapped
        }
    }

    /// Why a STUN datagram gave no mapped address.
    public enum ParseError: Error, Equatable, Sendable {
        case notSTUN
        case notBindingSuccess
        case truncated
        case noMappedAddress
    }

    /// Reads a binding success response: XOR-MAPPED-ADDRESS (0x0020 or 0x8020) wins over
    /// MAPPED-ADDRESS; attributes are bounded by the header's length.
    public static func parseResponse(_ packet: some Collection<UInt8>) throws(ParseError) -> Response {
        let bytes = Array(packet)
        guard looksLikeSTUN(bytes) else { throw .notSTUN }
        guard UInt16(bytes[0]) << 8 | UInt16(bytes[1]) == bindingSuccess else { throw .notBindingSuccess }
        let declared = Int(UInt16(bytes[2]) << 8 | UInt16(bytes[3]))
        guard headerLength + declared <= bytes.count else { throw .truncated }
        let txID = Array(bytes[8..<20])
        var offset = headerLength
        let end = headerLength + declared
        var xorMapped: DiscoEndpoint?
        var mapped: DiscoEndpoint?
        var count = 0
        while offset + 4 <= end, count < maxAttributes {
            count += 1
            let type = UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
            let length = Int(UInt16(bytes[offset + 2]) << 8 | UInt16(bytes[offset + 3]))
            let valueStart = offset + 4
            guard valueStart + length <= end else { throw .truncated }
            let value = bytes[valueStart..<valueStart + length]
            switch type {
            case attributeXORMappedAddress, attributeXORMappedAddressAlt:
                if xorMapped == nil { xorMapped = address(value, xorWith: magicCookie + txID) }
            case attributeMappedAddress:
                if mapped == nil { mapped = address(value, xorWith: nil) }
            default:
                break
            }
            offset = valueStart + (length + 3) / 4 * 4
        }
        guard let found = xorMapped ?? mapped else { throw .noMappedAddress }
        return Response(txID: txID, mapped: found)
    }

    /// A (XOR-)MAPPED-ADDRESS value: unused byte, family (1: IPv4, 2: IPv6), port, address.
    private static func address(_ value: ArraySlice<UInt8>, xorWith key: [UInt8]?) -> DiscoEndpoint? {
        let v = Array(value)
        guard v.count >= 4 else { return nil }
        let addressLength: Int
        switch v[1] {
        case 1: addressLength = 4
        case 2: addressLength = 16
        default: return nil
        }
        guard v.count >= 4 + addressLength else { return nil }
        var port = UInt16(v[2]) << 8 | UInt16(v[3])
        var address = Array(v[4..<4 + addressLength])
        if let key {
            port ^= 0x2112
            for i in 0..<addressLength { address[i] ^= key[i] }
        }
        return DiscoEndpoint(raw: address, port: port)
    }

    /// A binding success response carrying `mapped` as XOR-MAPPED-ADDRESS (test servers,
    /// fuzzing).
    public static func response(txID: [UInt8], mapped: DiscoEndpoint) -> [UInt8] {
        let raw = mapped.ipv4 ?? mapped.address
        let key = magicCookie + txID
        let port = mapped.port ^ 0x2112
        var value: [UInt8] = [0, raw.count == 4 ? 1 : 2, UInt8(port >> 8), UInt8(port & 0xff)]
        value += raw.enumerated().map { $0.element ^ key[$0.offset] }
        let length = 4 + value.count
        return [0x01, 0x01, 0x00, UInt8(length)] + magicCookie + txID
            + [0x00, 0x20, 0x00, UInt8(value.count)] + value
    }
}

/// CRC-32 (IEEE, reflected, as zlib's) for STUN's FINGERPRINT.
enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xff)] ^ (crc >> 8) }
        return crc ^ 0xFFFF_FFFF
    }
}
