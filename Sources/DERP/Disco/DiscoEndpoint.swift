#if canImport(Glibc)
import Glibc
#endif

/// A UDP endpoint as disco and `Node.endpoints` carry it: a 16-byte address (IPv4 as
/// IPv4-mapped IPv6, `::ffff:a.b.c.d`) and a port.
public struct DiscoEndpoint: Hashable, Sendable, CustomStringConvertible {
    /// 16 bytes.
    public var address: [UInt8]
    public var port: UInt16

    /// An endpoint from a 16-byte address and a port.
    public init(address: [UInt8], port: UInt16) {
        self.address = address
        self.port = port
    }

    /// An IPv4 address as its IPv4-mapped IPv6 form (`::ffff:a.b.c.d`).
    public static func ipv4Mapped(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8, port: UInt16) -> DiscoEndpoint {
        DiscoEndpoint(address: Self.v4MappedPrefix + [a, b, c, d], port: port)
    }

    /// An endpoint from 4 (IPv4) or 16 (IPv6) address bytes; nil for any other length.
    public init?(raw: some Collection<UInt8>, port: UInt16) {
        switch raw.count {
        case 4: self.init(address: Self.v4MappedPrefix + Array(raw), port: port)
        case 16: self.init(address: Array(raw), port: port)
        default: return nil
        }
    }

    static let v4MappedPrefix: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]

    /// True for an IPv4 (IPv4-mapped) address.
    public var isIPv4: Bool { address.count == 16 && address.starts(with: Self.v4MappedPrefix) }

    /// The 4 bytes of an IPv4 address; nil for IPv6.
    public var ipv4: [UInt8]? { isIPv4 ? Array(address[12..<16]) : nil }

    /// 127/8 or ::1.
    public var isLoopback: Bool {
        if let v4 = ipv4 { return v4[0] == 127 }
        return address == [UInt8](repeating: 0, count: 15) + [1]
    }

    /// 169.254/16 or fe80::/10.
    public var isLinkLocal: Bool {
        if let v4 = ipv4 { return v4[0] == 169 && v4[1] == 254 }
        return address.count == 16 && address[0] == 0xfe && address[1] & 0xc0 == 0x80
    }

    /// 10/8, 172.16/12, 192.168/16 or fc00::/7 (the "private" bonus of the path score).
    public var isPrivate: Bool {
        if let v4 = ipv4 { return v4[0] == 10 || (v4[0] == 172 && v4[1] & 0xf0 == 16) || (v4[0] == 192 && v4[1] == 168) }
        return isUniqueLocal
    }

    /// fc00::/7.
    public var isUniqueLocal: Bool { !isIPv4 && address.count == 16 && address[0] & 0xfe == 0xfc }

    /// Inside Coder's service prefix fd60:627a:a42b::/48 (never a path).
    public var isCoderServiceAddress: Bool {
        !isIPv4 && address.starts(with: [0xfd, 0x60, 0x62, 0x7a, 0xa4, 0x2b])
    }

    /// The unspecified address (0.0.0.0 or ::).
    public var isUnspecified: Bool {
        if let v4 = ipv4 { return v4 == [0, 0, 0, 0] }
        return address.allSatisfy { $0 == 0 }
    }

    /// Go's `netip.AddrPort` text: `203.0.113.7:41641`, `[2001:db8::1]:41641`.
    public var description: String {
        if let v4 = ipv4 { return "\(v4[0]).\(v4[1]).\(v4[2]).\(v4[3]):\(port)" }
        return "[\(Self.ipv6Text(address))]:\(port)"
    }

    /// The address alone (`203.0.113.7`, `2001:db8::1`).
    public var addressText: String {
        if let v4 = ipv4 { return "\(v4[0]).\(v4[1]).\(v4[2]).\(v4[3])" }
        return Self.ipv6Text(address)
    }

    /// Parses `a.b.c.d:port` or `[v6]:port` (a zone is refused); nil otherwise.
    public init?(_ text: some StringProtocol) {
        let text = String(text)
        guard text.utf8.count <= 64, let colon = text.lastIndex(of: ":") else { return nil }
        let host = text[..<colon]
        guard let port = UInt16(text[text.index(after: colon)...]) else { return nil }
        if host.hasPrefix("["), host.hasSuffix("]") {
            let inner = String(host.dropFirst().dropLast())
            guard !inner.contains("%"), let bytes = Self.parse(inner, family: AF_INET6, length: 16) else { return nil }
            self.init(address: bytes, port: port)
        } else {
            guard let bytes = Self.parse(String(host), family: AF_INET, length: 4) else { return nil }
            self.init(raw: bytes, port: port)
        }
    }

    private static func parse(_ text: String, family: Int32, length: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: 16)
        let ok = bytes.withUnsafeMutableBytes { inet_pton(family, text, $0.baseAddress) } == 1
        return ok ? Array(bytes.prefix(length)) : nil
    }

    private static func ipv6Text(_ address: [UInt8]) -> String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard address.count == 16, address.withUnsafeBytes({ inet_ntop(AF_INET6, $0.baseAddress, &text, socklen_t(text.count)) }) != nil else {
            return "::"
        }
        return String(decoding: text.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
