import AgentProto
import DERP

/// A STUN target from the DERP map: a node with `stun_port` ≥ 0 (0 means 3478; -1 none),
/// at `stun_test_ip`, else its literal `ipv4`/`ipv6` (host names are not resolved: Coder's
/// STUN regions carry literal addresses or names a later version may resolve).
struct STUNServer: Hashable, Sendable {
    var region: Int64
    var endpoint: DiscoEndpoint

    /// Every STUN target of `map`, one per node and family, in region order (bounded by the
    /// map, at most ``maxServers``).
    static func all(in map: Coder_Tailnet_V2_DERPMap) -> [STUNServer] {
        var servers: [STUNServer] = []
        for regionID in map.regions.keys.sorted() {
            guard let region = map.regions[regionID] else { continue }
            for node in region.nodes where node.stunPort >= 0 {
                let port = node.stunPort == 0 ? 3478 : UInt16(clamping: node.stunPort)
                var texts: [String] = []
                if !node.stunTestIp.isEmpty {
                    texts = [node.stunTestIp]
                } else {
                    texts = [node.ipv4, node.ipv6].filter { !$0.isEmpty && $0 != "none" }
                }
                for text in texts {
                    let literal = text.contains(":") ? "[\(text)]:\(port)" : "\(text):\(port)"
                    guard let endpoint = DiscoEndpoint(literal), !endpoint.isUnspecified else { continue }
                    servers.append(STUNServer(region: regionID, endpoint: endpoint))
                    if servers.count >= maxServers { return servers }
                }
            }
        }
        return servers
    }

    /// A DERP map lists a handful of STUN nodes; more than this are ignored.
    static let maxServers = 32
}
