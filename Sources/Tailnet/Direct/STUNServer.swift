import AgentProto
import DERP

/// A STUN target to probe: a region's node at one address.
struct STUNServer: Hashable, Sendable {
    var region: Int64
    var endpoint: DiscoEndpoint

    /// A DERP map lists a handful of STUN nodes; more than this are ignored.
    static let maxServers = 32
}

/// Where each STUN node of a DERP map is probed: a node with `stun_port` ≥ 0 (0 means 3478;
/// -1 none), per family at `stun_test_ip`, else its literal `ipv4`/`ipv6` (`none`, or an
/// address of the other family, disables that family), else the addresses DNS gives its
/// `host_name`, as Coder's STUN-only regions (`stun.l.google.com:19302` by default) need.
struct STUNTargets: Equatable, Sendable {
    /// One probe target: a literal address, or a host name to resolve for one family.
    enum Target: Equatable, Sendable {
        case literal(DiscoEndpoint)
        case name(host: String, port: UInt16, ipv6: Bool)
    }

    /// In region order, each node's IPv4 target before its IPv6 one (at most
    /// ``STUNServer/maxServers``).
    private(set) var targets: [(region: Int64, target: Target)] = []

    init(_ map: Coder_Tailnet_V2_DERPMap) {
        for regionID in map.regions.keys.sorted() {
            guard let region = map.regions[regionID] else { continue }
            for node in region.nodes where node.stunPort >= 0 {
                let port = node.stunPort == 0 ? 3478 : UInt16(clamping: node.stunPort)
                for target in Self.targets(of: node, port: port) where targets.count < STUNServer.maxServers {
                    targets.append((regionID, target))
                }
            }
        }
    }

    private static func targets(of node: Coder_Tailnet_V2_DERPMap.Region.Node, port: UInt16) -> [Target] {
        if !node.stunTestIp.isEmpty {
            return literal(node.stunTestIp, port: port).map { [.literal($0)] } ?? []
        }
        var found: [Target] = []
        for (text, ipv6) in [(node.ipv4, false), (node.ipv6, true)] {
            if text.isEmpty {
                if !node.hostName.isEmpty, node.hostName.utf8.count <= maxHostName {
                    found.append(.name(host: node.hostName, port: port, ipv6: ipv6))
                }
            } else if text != "none", let endpoint = literal(text, port: port), endpoint.isIPv4 != ipv6 {
                found.append(.literal(endpoint))
            }
        }
        return found
    }

    private static func literal(_ text: String, port: UInt16) -> DiscoEndpoint? {
        guard let endpoint = DiscoEndpoint(text.contains(":") ? "[\(text)]:\(port)" : "\(text):\(port)"), !endpoint.isUnspecified else { return nil }
        return endpoint
    }

    /// A DNS name is at most 253 bytes; a longer `host_name` is not looked up.
    static let maxHostName = 253

    /// The host names to resolve, each once.
    var hostNames: [String] {
        var seen: Set<String> = []
        return targets.compactMap { entry in
            guard case .name(let host, _, _) = entry.target, seen.insert(host).inserted else { return nil }
            return host
        }
    }

    /// The servers to probe, given what the names resolved to (a name not in `resolved`,
    /// or without an address of a target's family, gives nothing for it).
    func servers(resolved: [String: STUNResolver.Addresses]) -> [STUNServer] {
        targets.compactMap { entry in
            switch entry.target {
            case .literal(let endpoint):
                return STUNServer(region: entry.region, endpoint: endpoint)
            case .name(let host, let port, let ipv6):
                guard let addresses = resolved[host], let address = ipv6 ? addresses.ipv6 : addresses.ipv4,
                    let endpoint = Self.literal(address, port: port)
                else { return nil }
                return STUNServer(region: entry.region, endpoint: endpoint)
            }
        }
    }

    static func == (a: STUNTargets, b: STUNTargets) -> Bool {
        a.targets.elementsEqual(b.targets) { $0.region == $1.region && $0.target == $1.target }
    }
}
