import Glibc

/// An IPv6 address of the tunnel (16 bytes, network order), cheap to hash and compare.
public struct TunnelAddress: Hashable, Sendable, CustomStringConvertible {
    /// The first and last 8 bytes, big-endian.
    public let high: UInt64
    public let low: UInt64

    /// The address of 16 bytes in network order (nil unless exactly 16).
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 16 else { return nil }
        var high: UInt64 = 0
        var low: UInt64 = 0
        for (index, byte) in bytes.enumerated() {
            if index < 8 { high = high << 8 | UInt64(byte) } else { low = low << 8 | UInt64(byte) }
        }
        self.high = high
        self.low = low
    }

    /// Parses the text form ("fd7a:115c:a1e0::1"); nil when it is not an IPv6 address.
    public init?(_ text: String) {
        var raw = [UInt8](repeating: 0, count: 16)
        guard inet_pton(AF_INET6, text, &raw) == 1 else { return nil }
        self.init(bytes: raw)
    }

    init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// The address in its C form's 16 bytes (network order), read without a copy.
    init(raw: UnsafeRawBufferPointer) {
        precondition(raw.count >= 16, "an IPv6 address is 16 bytes")
        high = UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
        low = UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
    }

    /// Writes the 16 bytes (network order) into a C address, with no array on the way.
    func store(into raw: UnsafeMutableRawBufferPointer) {
        precondition(raw.count >= 16, "an IPv6 address is 16 bytes")
        raw.storeBytes(of: high.bigEndian, toByteOffset: 0, as: UInt64.self)
        raw.storeBytes(of: low.bigEndian, toByteOffset: 8, as: UInt64.self)
    }

    /// The 16 bytes in network order.
    public var bytes: [UInt8] {
        (0..<16).map { index in
            index < 8 ? UInt8(truncatingIfNeeded: high >> (56 - 8 * index)) : UInt8(truncatingIfNeeded: low >> (56 - 8 * (index - 8)))
        }
    }

    /// The canonical text form (RFC 5952, as inet_ntop writes it).
    public var description: String {
        var raw = bytes
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &raw, &text, socklen_t(text.count)) != nil else { return "::" }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// ff00::/8.
    var isMulticast: Bool { high >> 56 == 0xFF }
    /// :: and ::1.
    var isUnspecifiedOrLoopback: Bool { high == 0 && low <= 1 }
}
