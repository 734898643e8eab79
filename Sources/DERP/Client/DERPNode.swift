import OutboundProxy

/// One DERP server of a region, as the DERP map describes it,
/// with the URL and dial rules of the reference.
public struct DERPNode: Equatable, Sendable {
    /// The node's name in the DERP map (e.g. `999b`).
    public var name: String
    /// The region the node belongs to (the Node's `preferred_derp` when it is home).
    public var regionID: Int
    /// DNS name: the Host, and the TLS server name unless `certName` is set.
    public var hostName: String
    /// The name the TLS certificate is checked against (and sent as SNI) when it differs
    /// from `hostName`, as the Go client does; empty: `hostName`.
    public var certName: String
    /// An IPv4 address to dial instead of resolving `hostName`; `"none"` disables IPv4.
    public var ipv4: String
    /// An IPv6 address to dial instead of resolving `hostName`; `"none"` disables IPv6.
    public var ipv6: String
    /// 0: the scheme's default (443 for https, 80 for http).
    public var derpPort: Int
    /// Plain HTTP instead of TLS.
    public var forceHTTP: Bool
    /// TLS without certificate verification (tests).
    public var insecureForTests: Bool
    /// A STUN-only node has no DERP server.
    public var stunOnly: Bool

    /// A node as the DERP map gives it; empty strings and 0 mean unset.
    public init(
        name: String = "", regionID: Int, hostName: String, certName: String = "", ipv4: String = "", ipv6: String = "",
        derpPort: Int = 0, forceHTTP: Bool = false, insecureForTests: Bool = false, stunOnly: Bool = false
    ) {
        self.name = name
        self.regionID = regionID
        self.hostName = hostName
        self.certName = certName
        self.ipv4 = ipv4
        self.ipv6 = ipv6
        self.derpPort = derpPort
        self.forceHTTP = forceHTTP
        self.insecureForTests = insecureForTests
        self.stunOnly = stunOnly
    }

    /// `https`, or `http` when `forceHTTP`.
    public var scheme: String { forceHTTP ? "http" : "https" }

    /// The port dialed: `derpPort`, or the scheme's default.
    public var port: Int { derpPort != 0 ? derpPort : (forceHTTP ? 80 : 443) }

    /// The host of the URL and the Host header: `ipv4` if set, else `hostName`; an IPv6
    /// literal in brackets; the port only when it is not the scheme's default.
    public var hostHeader: String {
        var host = Self.isAddress(ipv4) ? ipv4 : hostName
        if host.contains(":") { host = "[\(host)]" }
        return port == (forceHTTP ? 80 : 443) ? host : "\(host):\(port)"
    }

    /// `<scheme>://<host>[:port]/derp`.
    public var url: String { "\(scheme)://\(hostHeader)/derp" }

    /// The name TLS checks and sends as SNI: `certName`, else `hostName`; nil for an
    /// address literal (SNI carries names only).
    public var tlsServerName: String? {
        ProxyRoute.serverName(for: tlsIdentity)
    }

    /// What the relay's certificate must name: `certName`, else `hostName` (a name, or an
    /// address that the certificate names as such).
    public var tlsIdentity: String { certName.isEmpty ? hostName : certName }

    /// Where to connect, in order: the `ipv4` and `ipv6` overrides when set (`"none"`
    /// skips that family), else `hostName` (resolved by the dialer). Never empty unless
    /// both families are disabled and there is no host name.
    public var dialHosts: [String] {
        var hosts: [String] = []
        if Self.isAddress(ipv4) { hosts.append(ipv4) }
        if Self.isAddress(ipv6) { hosts.append(ipv6) }
        if hosts.isEmpty, !hostName.isEmpty { hosts.append(hostName) }
        return hosts
    }

    /// True for a set address (neither empty nor `"none"`).
    static func isAddress(_ value: String) -> Bool { !value.isEmpty && value != "none" }
}
