/// WireGuard's four message layouts (little-endian type word, then fixed fields).
enum WireGuardMessage {
    static let initiationType: UInt32 = 1
    static let responseType: UInt32 = 2
    static let cookieReplyType: UInt32 = 3
    static let transportType: UInt32 = 4

    /// Initiation: type ‖ sender ‖ ephemeral 32 ‖ static 32+16 ‖ timestamp 12+16 ‖ mac1 ‖ mac2.
    enum Initiation {
        static let size = 148
        static let sender = 4
        static let ephemeral = 8
        static let encryptedStatic = 40
        static let encryptedTimestamp = 88
        static let mac1 = 116
        static let mac2 = 132
    }

    /// Response: type ‖ sender ‖ receiver ‖ ephemeral 32 ‖ empty 0+16 ‖ mac1 ‖ mac2.
    enum Response {
        static let size = 92
        static let sender = 4
        static let receiver = 8
        static let ephemeral = 12
        static let encryptedEmpty = 44
        static let mac1 = 60
        static let mac2 = 76
    }

    /// Cookie reply: type ‖ receiver ‖ nonce 24 ‖ cookie 16+16.
    enum CookieReply {
        static let size = 64
        static let receiver = 4
        static let nonce = 8
        static let encryptedCookie = 32
    }

    /// Transport: type ‖ receiver ‖ counter (LE 64) ‖ data ‖ tag 16.
    enum Transport {
        static let headerSize = 16
        static let receiver = 4
        static let counter = 8
        static let minimumSize = 32
    }

    /// Padding multiple of transport plaintext.
    static let paddingMultiple = 16
    /// The largest IP packet accepted either way (IP's own limit).
    static let maximumPacketSize = 65535
    /// The largest transport message: header, the largest packet padded, tag.
    static let maximumTransportSize = Transport.headerSize + 65536 + 16

    @inline(__always)
    static func readU32(_ raw: UnsafeRawBufferPointer, _ offset: Int) -> UInt32 {
        UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }

    @inline(__always)
    static func writeU32(_ raw: UnsafeMutableRawBufferPointer, _ offset: Int, _ value: UInt32) {
        raw.storeBytes(of: value.littleEndian, toByteOffset: offset, as: UInt32.self)
    }

    /// The padded plaintext size (wireguard-go's calculatePaddingSize plus the packet).
    static func paddedSize(_ size: Int, mtu: Int) -> Int {
        var lastUnit = size
        if mtu == 0 { return (size + paddingMultiple - 1) & ~(paddingMultiple - 1) }
        if lastUnit > mtu { lastUnit %= mtu }
        var padded = (lastUnit + paddingMultiple - 1) & ~(paddingMultiple - 1)
        if padded > mtu { padded = mtu }
        return size + (padded - lastUnit)
    }
}
