import CoreMetrics
import Metrics
import TunnelStack
import WireGuard

/// What the tailnet counts, under `agent_tailnet_`: enough to tell "agent unreachable" apart
/// from `/metrics` alone (no relay, no handshake, drops by reason).
struct TailnetMetrics: Sendable {
    /// WireGuard peers configured now.
    let peers = Gauge(label: "agent_tailnet_peers")
    /// Handshakes completed (answered initiations and our own answered).
    let handshakes = Counter(label: "agent_tailnet_handshakes_total")
    /// DERP connections made and lost (reconnects are the connects after the first).
    let derpConnects = Counter(label: "agent_tailnet_derp_connects_total")
    let derpDisconnects = Counter(label: "agent_tailnet_derp_disconnects_total")
    /// Packets through the tunnel, and their bytes, each way (inner IP packets).
    let packetsIn = Counter(label: "agent_tailnet_packets_total", dimensions: [("direction", "in")])
    let packetsOut = Counter(label: "agent_tailnet_packets_total", dimensions: [("direction", "out")])
    let bytesIn = Counter(label: "agent_tailnet_bytes_total", dimensions: [("direction", "in")])
    let bytesOut = Counter(label: "agent_tailnet_bytes_total", dimensions: [("direction", "out")])
    /// TSMP pings answered (coderd's AwaitReachable) and disco pings answered (`coder ping`).
    let tsmpPongs = Counter(label: "agent_tailnet_tsmp_pongs_total")
    let discoPings = Counter(label: "agent_tailnet_disco_pings_total")
    /// WireGuard messages for which no relay connection was available.
    let noRelay = Counter(label: "agent_tailnet_dropped_total", dimensions: [("reason", "no_relay")])
    /// Messages a relay connection's bounded queue refused.
    let queueFull = Counter(label: "agent_tailnet_dropped_total", dimensions: [("reason", "relay_queue_full")])
    /// WireGuard bytes by path and direction (DERP includes disco sent over DERP).
    let bytesDERPIn = Counter(label: "agent_tailnet_path_bytes_total", dimensions: [("path", "derp"), ("direction", "in")])
    let bytesDERPOut = Counter(label: "agent_tailnet_path_bytes_total", dimensions: [("path", "derp"), ("direction", "out")])
    let bytesDirectIn = Counter(label: "agent_tailnet_path_bytes_total", dimensions: [("path", "direct"), ("direction", "in")])
    let bytesDirectOut = Counter(label: "agent_tailnet_path_bytes_total", dimensions: [("path", "direct"), ("direction", "out")])
    /// Path changes (DERP ⇄ direct, one direct address for another).
    let pathSwitches = Counter(label: "agent_tailnet_path_switches_total")
    /// UDP datagrams dropped: WireGuard from a source no disco exchange verified.
    let unverifiedUDP = Counter(label: "agent_tailnet_dropped_total", dimensions: [("reason", "unverified_udp_source")])
    /// Disco and STUN over the direct paths.
    let discoPingsSent = Counter(label: "agent_tailnet_disco_sent_total", dimensions: [("type", "ping")])
    let discoPongsSent = Counter(label: "agent_tailnet_disco_sent_total", dimensions: [("type", "pong")])
    let discoCallMeMaybeSent = Counter(label: "agent_tailnet_disco_sent_total", dimensions: [("type", "call_me_maybe")])
    let discoPongsReceived = Counter(label: "agent_tailnet_disco_received_total", dimensions: [("type", "pong")])
    let discoCallMeMaybeReceived = Counter(label: "agent_tailnet_disco_received_total", dimensions: [("type", "call_me_maybe")])
    let discoUnknownSender = Counter(label: "agent_tailnet_disco_dropped_total", dimensions: [("reason", "unknown_sender")])
    let discoCannotOpen = Counter(label: "agent_tailnet_disco_dropped_total", dimensions: [("reason", "cannot_open")])
    let discoInvalid = Counter(label: "agent_tailnet_disco_dropped_total", dimensions: [("reason", "invalid")])
    let stunRequests = Counter(label: "agent_tailnet_stun_requests_total")
    let stunReplies = Counter(label: "agent_tailnet_stun_replies_total")

    /// Counts what one step of the direct-path logic counted.
    func record(from before: DirectCounters, to after: DirectCounters) {
        let pairs: [(Counter, KeyPath<DirectCounters, Int>)] = [
            (discoPingsSent, \.pingsSent), (discoPongsSent, \.pongsSent), (discoCallMeMaybeSent, \.callMeMaybeSent),
            (discoPongsReceived, \.pongsReceived), (discoCallMeMaybeReceived, \.callMeMaybeReceived),
            (discoUnknownSender, \.discoUnknownSender), (discoCannotOpen, \.discoCannotOpen), (discoInvalid, \.discoDropped),
            (stunRequests, \.stunRequests), (stunReplies, \.stunReplies), (pathSwitches, \.pathSwitches),
        ]
        for (counter, path) in pairs where after[keyPath: path] > before[keyPath: path] {
            counter.increment(by: Int64(after[keyPath: path] - before[keyPath: path]))
        }
    }

    /// Open tunnel TCP connections (port 4 and forwarded ports).
    let tunnelConnections = Gauge(label: "agent_tailnet_tcp_connections")
    /// Open UDP flows forwarded through the tunnel to the workspace's loopback.
    let udpFlows = Gauge(label: "agent_tailnet_udp_flows")

    /// The stack's gauges from its counters.
    func record(_ counters: TunnelStackCounters) {
        tunnelConnections.record(counters.openConnections)
        udpFlows.record(counters.udpFlowsOpen)
    }

    /// Counts one dropped packet by its WireGuard reason (no session, replay, bad mac,
    /// source not allowed, queue full, unknown key, malformed, ...).
    func dropped(_ reason: WireGuardDropReason) {
        Counter(label: "agent_tailnet_dropped_total", dimensions: [("reason", "\(reason)")]).increment()
    }
}

extension WireGuardReceiveResult {
    /// True for a dropped datagram.
    var isDropped: Bool {
        if case .dropped = self { return true }
        return false
    }
}
