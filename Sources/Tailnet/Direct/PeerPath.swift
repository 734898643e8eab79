import DERP
import WireGuard

/// One peer's path choice (magicsock's `endpoint`), sans-IO: events in with the time they
/// happen, actions out. It keeps the peer's candidate UDP addresses, the best one a pong
/// confirmed and until when it is trusted, the pings in flight and the heartbeat.
///
/// States (the send decision): DERP only (no best address); direct and trusted (UDP alone);
/// direct and unconfirmed (UDP and DERP both, and a discovery round on each send).
struct PeerPath: Sendable {
    /// What to do with one WireGuard datagram for this peer.
    enum Route: Equatable, Sendable {
        case derp
        case direct(DiscoEndpoint)
        case both(DiscoEndpoint)
    }

    /// What the owner carries out for the path.
    enum Action: Equatable, Sendable {
        /// A disco Ping with this transaction ID to `endpoint` over UDP.
        case ping(DiscoEndpoint, txID: [UInt8])
        /// A CallMeMaybe with our endpoints, over DERP.
        case callMeMaybe
    }

    struct Candidate: Sendable {
        var fromNode = false
        var fromCallMeMaybe = false
        /// Learned from a ping it sent us: kept 45 s after its last ping.
        var fromPing = false
        var lastPingSent: WireGuardInstant?
        var lastPingReceived: WireGuardInstant?
        var lastReceivedTxID: [UInt8]?
    }

    struct Outstanding: Sendable {
        var to: DiscoEndpoint
        var sentAt: WireGuardInstant
    }

    /// At most this many candidates (a sweep drops ping-learned ones beyond it) and this many
    /// pings in flight (each is forgotten after 5 s; a round adds one per candidate).
    static let maxCandidates = 100
    static let maxOutstanding = 256

    private(set) var candidates: [DiscoEndpoint: Candidate] = [:]
    private(set) var best: (endpoint: DiscoEndpoint, latency: UInt64)?
    private(set) var trustedUntil = WireGuardInstant.zero
    private(set) var outstanding: [[UInt8]: Outstanding] = [:]
    private(set) var lastSend: WireGuardInstant?
    private(set) var lastFullPing: WireGuardInstant?
    private(set) var heartbeatAt: WireGuardInstant?
    /// Path changes (DERP ⇄ direct, one direct address to another), for the metric.
    private(set) var switches = 0

    init() {}

    /// The current route for a send at `now`, without side effects (status pages).
    func route(at now: WireGuardInstant) -> Route {
        guard let best else { return .derp }
        return now <= trustedUntil ? .direct(best.endpoint) : .both(best.endpoint)
    }

    /// True while the best address is trusted (UDP alone).
    func isTrusted(at now: WireGuardInstant) -> Bool { best != nil && now <= trustedUntil }

    // MARK: Events

    /// A WireGuard datagram is about to go to the peer: where it goes, and the pings of a
    /// discovery round when the path is not trusted.
    mutating func send(now: WireGuardInstant, random: inout some RandomNumberGenerator) -> (Route, [Action]) {
        lastSend = now
        if heartbeatAt == nil { heartbeatAt = now.adding(nanoseconds: DirectTimers.heartbeatInterval) }
        let route = route(at: now)
        if case .direct = route { return (route, []) }
        return (route, discoveryRound(now: now, sendCallMeMaybe: true, random: &random))
    }

    /// The heartbeat is due: ping the best address, run a full round when one is due, re-arm;
    /// after 45 s without sends it stops until the next send.
    mutating func heartbeat(now: WireGuardInstant, random: inout some RandomNumberGenerator) -> [Action] {
        guard let due = heartbeatAt, now >= due else { return [] }
        guard let lastSend, now.since(lastSend) <= DirectTimers.sessionActiveTimeout else {
            heartbeatAt = nil
            return []
        }
        heartbeatAt = now.adding(nanoseconds: DirectTimers.heartbeatInterval)
        var actions: [Action] = []
        if let best, outstanding.count < Self.maxOutstanding {
            actions.append(ping(best.endpoint, now: now, random: &random))
        }
        let upgradeDue =
            best.map { $0.latency > DirectTimers.goodEnoughLatency } ?? false
            && lastFullPing.map { now.since($0) >= DirectTimers.upgradeInterval } ?? true
        if best == nil || lastFullPing == nil || now > trustedUntil || upgradeDue {
            actions += discoveryRound(now: now, sendCallMeMaybe: true, random: &random)
        }
        return actions
    }

    /// The peer's Node listed these endpoints (replacing the Node's earlier list).
    mutating func setNodeEndpoints(_ endpoints: [DiscoEndpoint]) {
        let wanted = Set(endpoints.filter(Self.usable))
        for (endpoint, var candidate) in candidates where candidate.fromNode && !wanted.contains(endpoint) {
            candidate.fromNode = false
            candidates[endpoint] = candidate
            dropIfUnsourced(endpoint)
        }
        for endpoint in wanted where candidates.count < Self.maxCandidates || candidates[endpoint] != nil {
            candidates[endpoint, default: Candidate()].fromNode = true
        }
    }

    /// A CallMeMaybe over DERP: its list replaces the previous one, and every candidate is
    /// pinged at once (no CallMeMaybe back). An empty list withdraws the sender's addresses.
    mutating func callMeMaybe(_ endpoints: [DiscoEndpoint], now: WireGuardInstant, random: inout some RandomNumberGenerator) -> [Action] {
        // IPv6 link-local skipped (Coder); IPv4 link-local is kept, as there.
        let wanted = Set(endpoints.filter { Self.usable($0) && !($0.isLinkLocal && !$0.isIPv4) })
        for (endpoint, var candidate) in candidates where candidate.fromCallMeMaybe && !wanted.contains(endpoint) {
            candidate.fromCallMeMaybe = false
            candidates[endpoint] = candidate
            dropIfUnsourced(endpoint)
        }
        for endpoint in wanted where candidates.count < Self.maxCandidates || candidates[endpoint] != nil {
            candidates[endpoint, default: Candidate()].fromCallMeMaybe = true
        }
        for endpoint in Array(candidates.keys) { candidates[endpoint]?.lastPingSent = nil }
        return discoveryRound(now: now, sendCallMeMaybe: false, random: &random)
    }

    /// A verified Ping over UDP from `source`: whether to answer it (not when it repeats the
    /// last transaction ID from that address). The source becomes a candidate.
    mutating func pingReceived(from source: DiscoEndpoint, txID: [UInt8], now: WireGuardInstant) -> Bool {
        if candidates[source] == nil {
            if candidates.count >= Self.maxCandidates { sweep(now: now) }
            guard candidates.count < Self.maxCandidates else { return true }
        }
        var candidate = candidates[source, default: Candidate()]
        candidate.fromPing = true
        candidate.lastPingReceived = now
        let repeated = candidate.lastReceivedTxID == txID
        candidate.lastReceivedTxID = txID
        candidates[source] = candidate
        return !repeated
    }

    /// A Pong over UDP answering our ping `txID`: true when it matched one to an address that
    /// is still a candidate (the caller then maps the pong's source to this peer). The address pinged becomes the best one when it
    /// is better, and a pong from the best address renews the trust.
    mutating func pongReceived(txID: [UInt8], now: WireGuardInstant) -> Bool {
        guard let ping = outstanding.removeValue(forKey: txID) else { return false }
        // An address withdrawn since the ping went (no longer a candidate) is not a path any
        // more, as magicsock ignores such a pong.
        guard candidates[ping.to] != nil else { return false }
        let latency = now.since(ping.sentAt)
        if AddressScore.isBetter((ping.to, latency), than: best.map { ($0.endpoint, $0.latency) }) {
            if best?.endpoint != ping.to { switches += 1 }
            best = (ping.to, latency)
        }
        if best?.endpoint == ping.to {
            best = (ping.to, latency)
            trustedUntil = now.adding(nanoseconds: DirectTimers.trustUDPAddr)
        }
        return true
    }

    /// Pings older than 5 s are forgotten; ping-learned candidates silent for 45 s go.
    mutating func expire(now: WireGuardInstant) {
        if outstanding.values.contains(where: { now.since($0.sentAt) >= DirectTimers.pingTimeout }) {
            outstanding = outstanding.filter { now.since($0.value.sentAt) < DirectTimers.pingTimeout }
        }
        sweep(now: now)
    }

    /// A UDP send failed for this txID: forget the ping at once.
    mutating func pingFailed(txID: [UInt8]) {
        outstanding[txID] = nil
    }

    /// Back to DERP only (endpoints blocked, disco key changed, link change with a rebind).
    mutating func reset() {
        if best != nil { switches += 1 }
        candidates = [:]
        best = nil
        trustedUntil = .zero
        outstanding = [:]
        lastSend = nil
        lastFullPing = nil
        heartbeatAt = nil
    }

    /// Trust ends now (sockets re-bound): the next send goes both ways and probes.
    mutating func distrust() { trustedUntil = .zero }

    /// The earliest instant something is due: the heartbeat or a ping's expiry.
    var nextDeadline: WireGuardInstant? {
        var earliest = heartbeatAt
        for ping in outstanding.values {
            earliest = DirectTimers.earliest(earliest, ping.sentAt.adding(nanoseconds: DirectTimers.pingTimeout))
        }
        return earliest
    }

    // MARK: Internals

    /// Pings every candidate not pinged in the last 5 s; a CallMeMaybe follows when at least
    /// one ping went out (unless the round answers one).
    private mutating func discoveryRound(now: WireGuardInstant, sendCallMeMaybe: Bool, random: inout some RandomNumberGenerator) -> [Action] {
        expire(now: now)
        // Only the candidates due (most sends find none), in a fixed order.
        let due = candidates.filter { $0.value.lastPingSent.map { now.since($0) >= DirectTimers.discoPingInterval } ?? true }.map(\.key)
        var actions: [Action] = []
        for endpoint in due.sorted(by: { $0.address.lexicographicallyPrecedes($1.address) || ($0.address == $1.address && $0.port < $1.port) }) {
            guard outstanding.count < Self.maxOutstanding else { break }
            actions.append(ping(endpoint, now: now, random: &random))
        }
        if !actions.isEmpty {
            lastFullPing = now
            if sendCallMeMaybe { actions.append(.callMeMaybe) }
        }
        return actions
    }

    private mutating func ping(_ endpoint: DiscoEndpoint, now: WireGuardInstant, random: inout some RandomNumberGenerator) -> Action {
        var txID = [UInt8](repeating: 0, count: DiscoMessage.txIDLength)
        for i in txID.indices { txID[i] = UInt8.random(in: 0...255, using: &random) }
        outstanding[txID] = Outstanding(to: endpoint, sentAt: now)
        candidates[endpoint]?.lastPingSent = now
        return .ping(endpoint, txID: txID)
    }

    /// Ping-learned candidates silent for 45 s lose that source, the sweep at 100 candidates
    /// included (as Tailscale's `shouldDeleteLocked`): a burst of pings from new addresses
    /// (replayed from a captured Ping) cannot push out a candidate in use.
    private mutating func sweep(now: WireGuardInstant) {
        guard candidates.values.contains(where: { $0.fromPing }) else { return }
        for (endpoint, var candidate) in candidates where candidate.fromPing {
            let silent = candidate.lastPingReceived.map { now.since($0) > DirectTimers.sessionActiveTimeout } ?? true
            guard silent else { continue }
            candidate.fromPing = false
            candidates[endpoint] = candidate
            dropIfUnsourced(endpoint)
        }
    }

    /// Removes a candidate no source names any more; if it was the best, back to DERP.
    private mutating func dropIfUnsourced(_ endpoint: DiscoEndpoint) {
        guard let candidate = candidates[endpoint], !candidate.fromNode, !candidate.fromCallMeMaybe, !candidate.fromPing else { return }
        candidates[endpoint] = nil
        if best?.endpoint == endpoint {
            best = nil
            trustedUntil = .zero
            switches += 1
        }
    }

    /// Never a path: unspecified, Coder's service prefix, port 0.
    static func usable(_ endpoint: DiscoEndpoint) -> Bool {
        endpoint.port != 0 && !endpoint.isUnspecified && !endpoint.isCoderServiceAddress
    }
}
