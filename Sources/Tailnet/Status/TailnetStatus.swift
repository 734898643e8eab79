import AgentCore
import DERP
import WireGuard

/// `GET /api/v0/tailnet`: what an operator needs to tell why coderd cannot reach the agent:
/// the node key, addresses, home region and its relay connection, and each peer with its
/// last handshake and bytes. Absent fields are left out (`{"enabled":false}` when off).
struct TailnetStatus: Encodable, Sendable {
    struct Relay: Encodable, Sendable {
        var region: Int32
        var state: String
        var transport: String?
        var lastError: String?
        var connects: Int
        var reconnects: Int

        enum CodingKeys: String, CodingKey {
            case region, state, transport, lastError = "last_error", connects, reconnects
        }
    }

    struct Peer: Encodable, Sendable {
        var nodeKey: String
        var homeRegion: Int32?
        var lost: Bool?
        var lastHandshakeSecondsAgo: Double?
        var receivedBytes: UInt64
        var sentBytes: UInt64
        /// `derp` or the direct `ip:port` WireGuard goes to.
        var path: String?
        /// The direct path is trusted (UDP alone); false: UDP and DERP both.
        var directTrusted: Bool?
        var lastPongMilliseconds: Double?
        var candidates: [String]?

        enum CodingKeys: String, CodingKey {
            case nodeKey = "node_key", homeRegion = "home_region", lost
            case lastHandshakeSecondsAgo = "last_handshake_seconds_ago", receivedBytes = "received_bytes", sentBytes = "sent_bytes"
            case path, directTrusted = "direct_trusted", lastPongMilliseconds = "last_pong_ms", candidates
        }
    }

    var enabled: Bool
    var started: Bool?
    var nodeKey: String?
    var discoKey: String?
    var addresses: [String]?
    var homeRegion: Int32?
    var relays: [Relay]?
    var peers: [Peer]?
    var tunnelConnections: Int?
    /// Open UDP flows through the tunnel.
    var udpFlows: Int?
    /// The direct paths: blocked or not, the UDP ports, the endpoints advertised.
    var directBlocked: Bool?
    var udpPorts: [String: UInt16]?
    var endpoints: [String]?

    enum CodingKeys: String, CodingKey {
        case enabled, started, nodeKey = "node_key", discoKey = "disco_key", addresses, homeRegion = "home_region"
        case relays, peers, tunnelConnections = "tunnel_connections", udpFlows = "udp_flows"
        case directBlocked = "direct_blocked", udpPorts = "udp_ports", endpoints
    }
}
