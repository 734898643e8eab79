/// An IP prefix from a Node's `allowed_ips` text (`fd7a:...:1/128`, `10.0.0.0/8`): the address
/// bytes (16 for IPv6, 4 for IPv4) and the prefix length.
public struct IPPrefix: Sendable, Hashable, CustomStringConvertible {
    public let address: [UInt8]
    public let bits: Int

    public init?(address: [UInt8], bits: Int) {
        guard address.count == 16 || address.count == 4, bits >= 0, bits <= address.count * 8 else { return nil }
        self.address = address
        self.bits = bits
    }

    /// Parses `<address>/<bits>`; an address without `/` is a host prefix.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let first = parts.first, first.utf8.count <= 64 else { return nil }
        let host = String(first)
        let bytes: [UInt8]
        if host.contains(":") {
            guard let v6 = TailnetAddresses.parse(host) else { return nil }
            bytes = v6
        } else {
            let octets = host.split(separator: ".", omittingEmptySubsequences: false)
            guard octets.count == 4 else { return nil }
            var v4: [UInt8] = []
            for octet in octets {
                guard octet.utf8.count <= 3, let value = UInt8(octet) else { return nil }
                v4.append(value)
            }
            bytes = v4
        }
        let bits: Int
        if parts.count == 2 {
            guard parts[1].utf8.count <= 3, let value = Int(parts[1]) else { return nil }
            bits = value
        } else {
            bits = bytes.count * 8
        }
        self.init(address: bytes, bits: bits)
    }

    /// Whether `address` (4 or 16 bytes) lies in this prefix.
    public func contains(_ other: some Collection<UInt8>) -> Bool {
        guard other.count == address.count else { return false }
        var remaining = bits
        for (mine, theirs) in zip(address, other) {
            if remaining <= 0 { return true }
            let mask: UInt8 = remaining >= 8 ? 0xff : ~(0xff >> UInt8(remaining))
            if mine & mask != theirs & mask { return false }
            remaining -= 8
        }
        return true
    }

    public var description: String {
        if address.count == 16 { return TailnetAddresses.text(address) + "/\(bits)" }
        return address.map(String.init).joined(separator: ".") + "/\(bits)"
    }
}
