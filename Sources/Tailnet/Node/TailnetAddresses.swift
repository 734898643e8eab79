#if canImport(Glibc)
import Glibc
#endif

/// The agent's two tunnel addresses and its node id, all derived from the agent's UUID:
/// the UUID's 16 bytes with the first 6 replaced by the
/// Tailscale prefix `fd7a:115c:a1e0::/48` (the address coderd dials) or the Coder prefix
/// `fd60:627a:a42b::/48` (Coder Connect); the node id is the UUID's last 8 bytes, big-endian,
/// made non-negative.
public struct TailnetAddresses: Sendable, Equatable {
    /// `fd7a:115c:a1e0::/48`.
    public static let tailscalePrefix: [UInt8] = [0xfd, 0x7a, 0x11, 0x5c, 0xa1, 0xe0]
    /// `fd60:627a:a42b::/48`.
    public static let coderPrefix: [UInt8] = [0xfd, 0x60, 0x62, 0x7a, 0xa4, 0x2b]

    /// The address coderd and the CLI dial (Tailscale prefix), 16 bytes.
    public let primary: [UInt8]
    /// The Coder Connect address (Coder prefix), 16 bytes.
    public let coder: [UInt8]
    /// The Node's `id`.
    public let nodeID: Int64

    /// Nil unless `agentID` is 16 bytes.
    public init?(agentID: [UInt8]) {
        guard agentID.count == 16 else { return nil }
        primary = Self.tailscalePrefix + agentID[6...]
        coder = Self.coderPrefix + agentID[6...]
        var id: UInt64 = 0
        for byte in agentID[8...] { id = id << 8 | UInt64(byte) }
        // Go's abs of an int64: Int64.min stays Int64.min there; here it saturates to max.
        let signed = Int64(bitPattern: id)
        nodeID = signed == .min ? .max : abs(signed)
    }

    /// Both addresses as the Node's `addresses` and `allowed_ips` text: `<ipv6>/128`,
    /// canonical lowercase compressed form (RFC 5952), the primary first.
    public var prefixes: [String] {
        [Self.text(primary) + "/128", Self.text(coder) + "/128"]
    }

    /// RFC 5952 text of a 16-byte IPv6 address (glibc's inet_ntop produces exactly it).
    public static func text(_ address: [UInt8]) -> String {
        precondition(address.count == 16, "an IPv6 address is 16 bytes")
        var storage = in6_addr()
        withUnsafeMutableBytes(of: &storage) { $0.copyBytes(from: address) }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        return buffer.withUnsafeMutableBufferPointer { out in
            guard inet_ntop(AF_INET6, &storage, out.baseAddress, socklen_t(out.count)) != nil else { return "" }
            return String(cString: out.baseAddress!)
        }
    }

    /// The 16 bytes of IPv6 text, or nil when it is not an IPv6 address.
    public static func parse(_ text: String) -> [UInt8]? {
        var storage = in6_addr()
        guard inet_pton(AF_INET6, text, &storage) == 1 else { return nil }
        return withUnsafeBytes(of: storage) { Array($0) }
    }
}
