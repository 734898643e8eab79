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
