import DERP
import WireGuard

/// One STUN report in flight (sans-IO): a binding request to each server, the replies
/// matched by transaction ID, finished when every server answered or the 2 s budget ran out.
struct NetcheckRun: Sendable {
    struct Reply: Sendable {
        var server: STUNServer
        var mapped: DiscoEndpoint
        var latency: UInt64
    }

    let startedAt: WireGuardInstant
    /// Every request of the run by transaction ID, answered or not.
    private let requested: [[UInt8]: STUNServer]
    private(set) var pending: [[UInt8]: STUNServer] = [:]
    private(set) var replies: [Reply] = []
    /// A request of that family went out: its send was reported sent (or lost on the way,
    /// see ``UDPSendOutcome``), or it was answered. Queued requests do not count.
    private(set) var canSendV4 = false
    private(set) var canSendV6 = false

    /// Starts a run: the requests to send (server, bytes).
    init(servers: [STUNServer], now: WireGuardInstant, random: inout some RandomNumberGenerator) {
        startedAt = now
        var requested: [[UInt8]: STUNServer] = [:]
        for server in servers {
            var txID = [UInt8](repeating: 0, count: STUN.txIDLength)
            for i in txID.indices { txID[i] = UInt8.random(in: 0...255, using: &random) }
            requested[txID] = server
        }
        self.requested = requested
        pending = requested
    }

    /// The datagrams to send now.
    var requests: [(STUNServer, [UInt8])] { pending.map { ($0.value, STUN.request(txID: $0.key)) } }

    var deadline: WireGuardInstant { startedAt.adding(nanoseconds: DirectTimers.netcheckBudget) }

    var isDone: Bool { pending.isEmpty }

    /// A STUN datagram arrived: true when it answered one of our requests.
    mutating func receive(_ datagram: [UInt8], now: WireGuardInstant) -> Bool {
        guard let response = try? STUN.parseResponse(datagram), let server = pending.removeValue(forKey: response.txID) else { return false }
        replies.append(Reply(server: server, mapped: response.mapped, latency: now.since(startedAt)))
        // An answer proves its request went out, even when it outruns the send's report.
        noteCanSend(server)
        return true
    }

    /// What became of the request `txID`: sent (or lost on the way), its family can send;
    /// failed, it will not be answered and is not waited for. Unknown IDs (a run since
    /// replaced) change nothing.
    mutating func sendResult(txID: [UInt8], outcome: UDPSendOutcome) {
        guard let server = requested[txID] else { return }
        switch outcome {
        case .sent, .lost: noteCanSend(server)
        case .failed: pending[txID] = nil
        }
    }

    private mutating func noteCanSend(_ server: STUNServer) {
        if server.endpoint.isIPv4 { canSendV4 = true } else { canSendV6 = true }
    }

    /// What the run found.
    var report: NetcheckResult {
        var result = NetcheckResult()
        result.udp = !replies.isEmpty
        let v4 = replies.filter { $0.mapped.isIPv4 }
        let v6 = replies.filter { !$0.mapped.isIPv4 }
        result.globalV4 = v4.first?.mapped
        result.globalV6 = v6.first?.mapped
        if v4.count >= 2 { result.mappingVariesByDestIP = v4.contains { $0.mapped != v4[0].mapped } }
        result.ipv4 = !v4.isEmpty
        result.ipv6 = !v6.isEmpty
        result.ipv4CanSend = canSendV4
        result.ipv6CanSend = canSendV6
        for reply in replies {
            let key = "\(reply.server.region)-\(reply.server.endpoint.isIPv4 ? "v4" : "v6")"
            result.stunLatency[key] = min(result.stunLatency[key] ?? .max, reply.latency)
        }
        return result
    }
}

/// The last STUN report: netcheck's fields that this agent fills.
struct NetcheckResult: Sendable, Equatable {
    var udp = false
    var ipv4 = false
    var ipv6 = false
    var ipv4CanSend = false
    var ipv6CanSend = false
    var globalV4: DiscoEndpoint?
    var globalV6: DiscoEndpoint?
    /// Set at the second IPv4 reply: whether the mapping differs per server (hard NAT).
    var mappingVariesByDestIP: Bool?
    /// STUN round trips by `<region>-v4` / `<region>-v6`, in nanoseconds.
    var stunLatency: [String: UInt64] = [:]
}
