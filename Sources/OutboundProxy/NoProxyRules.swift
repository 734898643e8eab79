import AgentSystem

/// `NO_PROXY` as Go's `httpproxy` reads it: comma-separated entries, each an IP address, a
/// CIDR prefix, a domain (which matches itself and its subdomains; `.domain` and `*.domain`
/// only subdomains), any of them with `:port`; `*` alone matches everything. Entries that
/// are none of these are skipped, as Go skips them.
struct NoProxyRules: Sendable, Equatable {
    struct Address: Sendable, Equatable {
        var address: IPAddressBytes
        /// As written (Go compares port text: `host:http` matches no numeric port).
        var port: String?
    }
    struct Prefix: Sendable, Equatable {
        var network: IPAddressBytes
        var bits: Int
    }
    struct Domain: Sendable, Equatable {
        /// With its leading dot.
        var suffix: String
        var port: String?
        /// The entry had no leading dot or `*`: the name itself matches too.
        var matchesName: Bool
    }

    private(set) var all = false
    private(set) var addresses: [Address] = []
    private(set) var prefixes: [Prefix] = []
    private(set) var domains: [Domain] = []

    init(_ text: String) {
        for piece in text.split(separator: ",", omittingEmptySubsequences: false) {
            let entry = String(piece).trimmingWhitespace().lowercased()
            if entry.isEmpty { continue }
            if entry == "*" {
                all = true
                return
            }
            if let slash = entry.firstIndex(of: "/") {
                // A CIDR prefix, or nothing Go accepts (Go's ParseCIDR or the host forms below).
                if let network = IPAddressBytes(String(entry[..<slash])), let bits = Int(entry[entry.index(after: slash)...]),
                    bits >= 0, bits <= network.bytes.count * 8
                {
                    prefixes.append(Prefix(network: network.masked(bits), bits: bits))
                    continue
                }
            }
            var host = entry
            var port: String?
            if let split = Self.splitHostPort(entry) {
                guard !split.host.isEmpty else { continue }
                host = split.host
                port = split.port
            }
            if let address = IPAddressBytes(host) {
                addresses.append(Address(address: address, port: port))
                continue
            }
            if host.hasPrefix("*.") { host.removeFirst() }
            if host.isEmpty { continue }
            let matchesName = !host.hasPrefix(".")
            if matchesName { host = "." + host }
            domains.append(Domain(suffix: host, port: port, matchesName: matchesName))
        }
    }

    /// Whether a request to `host` (lowercased) on `port` is exempt from the proxy.
    func matches(host: String, port portNumber: Int, address: IPAddressBytes?) -> Bool {
        if all { return true }
        let port = String(portNumber)
        if let address {
            if addresses.contains(where: { $0.address == address && ($0.port == nil || $0.port == port) }) { return true }
            if prefixes.contains(where: { address.masked($0.bits) == $0.network }) { return true }
        }
        return domains.contains { domain in
            (host.hasSuffix(domain.suffix) || (domain.matchesName && host == domain.suffix.dropFirst())) && (domain.port == nil || domain.port == port)
        }
    }

    /// Go's `net.SplitHostPort` for `host:port` and `[v6]:port`, the port as written; nil when
    /// the entry is not of that form (a bare host, a bare IPv6 address).
    static func splitHostPort(_ entry: String) -> (host: String, port: String?)? {
        if entry.hasPrefix("[") {
            guard let close = entry.firstIndex(of: "]") else { return nil }
            let rest = entry[entry.index(after: close)...]
            guard rest.hasPrefix(":") else { return nil }
            let port = rest.dropFirst()
            return (String(entry[entry.index(after: entry.startIndex)..<close]), port.isEmpty ? nil : String(port))
        }
        guard let colon = entry.lastIndex(of: ":"), entry.firstIndex(of: ":") == colon else { return nil }
        let portText = entry[entry.index(after: colon)...]
        return (String(entry[..<colon]), portText.isEmpty ? nil : String(portText))
    }
}
