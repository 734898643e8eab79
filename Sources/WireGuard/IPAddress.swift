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
