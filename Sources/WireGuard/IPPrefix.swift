/// An IP address (IPv4 or IPv6) as a number, for cryptokey routing.
public struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    /// True for IPv6, false for IPv4.
    public let isIPv6: Bool
    /// The address, big-endian bytes read as a number (IPv4 in the low 32 bits).
    public let value: UInt128

    /// An IPv6 address from 16 bytes or an IPv4 address from 4; nil otherwise.
    public init?(bytes: some Collection<UInt8>) {
        switch bytes.count {
        case 16: isIPv6 = true
        case 4: isIPv6 = false
        default: return nil
        }
        value = bytes.reduce(0) { $0 << 8 | UInt128($1) }
    }

    init(isIPv6: Bool, value: UInt128) {
        self.isIPv6 = isIPv6
        self.value = value
    }

    /// Reads 16 (IPv6) or 4 (IPv4) bytes at `offset`; the caller checked the length.
    init(reading raw: UnsafeRawBufferPointer, at offset: Int, isIPv6: Bool) {
        self.isIPv6 = isIPv6
        if isIPv6 {
            let high = UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            let low = UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self))
            value = UInt128(high) << 64 | UInt128(low)
        } else {
            value = UInt128(UInt32(bigEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
        }
    }

    /// Parses text: IPv4 dotted quad or IPv6 (with `::` compression).
    public init?(_ text: some StringProtocol) {
        if text.contains(":") {
            let halves = text.split(separator: "::", maxSplits: 1, omittingEmptySubsequences: false)
            guard halves.count <= 2 else { return nil }
            func groups(_ s: Substring) -> [UInt16]? {
                if s.isEmpty { return [] }
                let parts = s.split(separator: ":", omittingEmptySubsequences: false)
                var out: [UInt16] = []
                for part in parts {
                    guard (1...4).contains(part.count), let g = UInt16(part, radix: 16) else { return nil }
                    out.append(g)
                }
                return out
            }
            guard let head = groups(Substring(halves[0])) else { return nil }
            var all = head
            if halves.count == 2 {
                guard let tail = groups(Substring(halves[1])), head.count + tail.count < 8 else { return nil }
                all += [UInt16](repeating: 0, count: 8 - head.count - tail.count) + tail
            }
            guard all.count == 8 else { return nil }
            isIPv6 = true
            value = all.reduce(0) { $0 << 16 | UInt128($1) }
        } else {
            let parts = text.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 4 else { return nil }
            var v: UInt128 = 0
            for part in parts {
                guard (1...3).contains(part.count), let octet = UInt8(part) else { return nil }
                v = v << 8 | UInt128(octet)
            }
            isIPv6 = false
            value = v
        }
    }

    /// The address's bytes (16 or 4).
    public var bytes: [UInt8] {
        let count = isIPv6 ? 16 : 4
        return (0..<count).map { UInt8(truncatingIfNeeded: value >> UInt128(8 * (count - 1 - $0))) }
    }

    /// Text: dotted quad, or eight hexadecimal groups (no compression).
    public var description: String {
        if !isIPv6 { return bytes.map(String.init).joined(separator: ".") }
        return (0..<8).map { String(UInt16(truncatingIfNeeded: value >> UInt128(16 * (7 - $0))), radix: 16) }.joined(separator: ":")
    }
}

/// An IP prefix (address/bits): one entry of a peer's allowed IPs.
public struct IPPrefix: Hashable, Sendable, CustomStringConvertible {
    /// The address with the host bits cleared.
    public let address: IPAddress
    /// The prefix length (0...128 for IPv6, 0...32 for IPv4).
    public let bits: Int

    /// A prefix; nil when `bits` is out of range for the family. Host bits are cleared.
    public init?(_ address: IPAddress, bits: Int) {
        let width = address.isIPv6 ? 128 : 32
        guard (0...width).contains(bits) else { return nil }
        self.bits = bits
        self.address = IPAddress(isIPv6: address.isIPv6, value: address.value & IPPrefix.mask(bits: bits, width: width))
    }

    /// Parses `address/bits` (a bare address is a single-address prefix).
    public init?(_ text: some StringProtocol) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPAddress(parts[0]) else { return nil }
        let width = address.isIPv6 ? 128 : 32
        let bits = parts.count == 2 ? Int(parts[1]) : width
        guard let bits else { return nil }
        self.init(address, bits: bits)
    }

    /// True when `other` lies inside this prefix.
    public func contains(_ other: IPAddress) -> Bool {
        guard other.isIPv6 == address.isIPv6 else { return false }
        let width = address.isIPv6 ? 128 : 32
        return other.value & IPPrefix.mask(bits: bits, width: width) == address.value
    }

    /// True for a single address (/128 or /32).
    public var isSingleAddress: Bool { bits == (address.isIPv6 ? 128 : 32) }

    static func mask(bits: Int, width: Int) -> UInt128 {
        if bits == 0 { return 0 }
        let all: UInt128 = width == 128 ? .max : UInt128(UInt32.max)
        return all & ~(all >> UInt128(bits))
    }

    /// `address/bits`.
    public var description: String { "\(address)/\(bits)" }
}
