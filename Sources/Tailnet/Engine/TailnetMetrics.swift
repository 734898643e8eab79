import CoreMetrics
import Metrics
import Synchronization
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

    /// What the tunnel stack counted (its counters since it started), as counters here.
    let stack = TunnelStackMetrics()

    /// The stack's gauges, and what it counted since the last record; returns its counters.
    @discardableResult
    func record(_ stack: TunnelStack) -> TunnelStackCounters {
        let counters = self.stack.record(stack)
        tunnelConnections.record(counters.openConnections)
        udpFlows.record(counters.udpFlowsOpen)
        return counters
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

/// The tunnel stack's counters under `agent_tailnet_tcp_`, `agent_tailnet_udp_` and
/// `agent_tailnet_stack_`. The stack counts from zero when it starts; each record reads its
/// counters and adds what they grew since the last (a new stack starts again from zero),
/// both under one lock, so that two scrapes at once add each count once.
final class TunnelStackMetrics: Sendable {
    private let last = Mutex<(stack: ObjectIdentifier?, counters: TunnelStackCounters)>((nil, TunnelStackCounters()))
    private let exports: [Export]

    /// One stack counter and the swift-metrics counter it goes to.
    struct Export: Sendable {
        let counter: Counter
        let value: @Sendable (TunnelStackCounters) -> UInt64

        init(_ label: String, _ dimensions: [(String, String)], _ value: @escaping @Sendable (TunnelStackCounters) -> UInt64) {
            counter = Counter(label: label, dimensions: dimensions)
            self.value = value
        }
    }

    init() {
        let tcp = "agent_tailnet_tcp_"
        let udp = "agent_tailnet_udp_"
        exports = [
            Export(tcp + "accepted_total", [], { $0.accepted }),
            Export(tcp + "forwarded_total", [], { $0.forwarded }),
            Export(tcp + "refused_total", [("reason", "reserved_port")], { $0.refusedReservedPort }),
            Export(tcp + "refused_total", [("reason", "no_listener")], { $0.refusedNoListener }),
            Export(tcp + "refused_total", [("reason", "connect_timeout")], { $0.refusedConnectTimeout }),
            Export(tcp + "refused_total", [("reason", "connection_limit")], { $0.refusedConnectionLimit }),
            Export(tcp + "refused_total", [("reason", "other")], { $0.refusedOther }),
            Export(tcp + "refused_total", [("reason", "half_open_limit")], { $0.droppedHalfOpenLimit }),
            Export(tcp + "handshake_timeouts_total", [], { $0.handshakeTimeouts }),
            Export(tcp + "timeouts_total", [("kind", "idle")], { $0.idleTimeouts }),
            Export(tcp + "timeouts_total", [("kind", "half_closed")], { $0.halfClosedTimeouts }),
            Export(tcp + "time_wait_reused_total", [], { $0.timeWaitReused }),
            Export(tcp + "challenge_acks_total", [("result", "sent")], { $0.challengeAcks }),
            Export(tcp + "challenge_acks_total", [("result", "limited")], { $0.challengeAcksLimited }),
            Export(tcp + "out_of_order_purges_total", [], { $0.outOfOrderPurges }),
            Export(tcp + "bytes_total", [("direction", "in")], { $0.bytesFromTunnel }),
            Export(tcp + "bytes_total", [("direction", "out")], { $0.bytesToTunnel }),
            Export("agent_tailnet_stack_dropped_total", [], { $0.packetsDropped }),
            Export(udp + "flows_opened_total", [], { $0.udpFlowsOpened }),
            Export(udp + "flows_refused_total", [], { $0.udpFlowsRefused }),
            Export(udp + "idle_timeouts_total", [], { $0.udpIdleTimeouts }),
            Export(udp + "datagrams_total", [("direction", "in")], { $0.udpDatagramsIn }),
            Export(udp + "datagrams_total", [("direction", "out")], { $0.udpDatagramsOut }),
            Export(udp + "datagrams_dropped_total", [], { $0.udpDatagramsDropped }),
        ]
    }

    /// Adds what `stack` counted since its last record (all of it for a stack not seen);
    /// returns its counters.
    func record(_ stack: TunnelStack) -> TunnelStackCounters {
        last.withLock { last in
            let counters = stack.counters()
            let identity = ObjectIdentifier(stack)
            let before = last.stack == identity ? last.counters : TunnelStackCounters()
            for export in exports where export.value(counters) > export.value(before) {
                export.counter.increment(by: Int64(clamping: export.value(counters) - export.value(before)))
            }
            last = (identity, counters)
            return counters
        }
    }
}
