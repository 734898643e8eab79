import DERP
import WireGuard

/// The direct-path logic of the tailnet (magicsock's), sans-IO: every peer's ``PeerPath``,
/// the UDP source → peer map that lets WireGuard in, disco over UDP and over DERP, the STUN
/// reports and the endpoint list. Events in with the time they happen; what to send comes
/// out in a ``DirectOutput``. The owner serialises the calls.
struct DirectPaths: Sendable {
    struct Peer: Sendable {
        var disco: X25519PublicKey
        /// The box key shared with the peer's disco key, computed once per disco key.
        var shared: NaClBox.SharedKey?
        var homeRegion: Int32
        /// The Node's endpoints as last received (kept while blocked, applied when unblocked).
        var nodeEndpoints: [DiscoEndpoint]
        var path = PeerPath()
    }

    /// What a UDP datagram was.
    enum Verdict: Equatable, Sendable {
        /// STUN (consumed by a report, or dropped).
        case stun
        /// Disco (consumed, answered or dropped).
        case disco
        /// WireGuard from a verified source of this peer: hand it to WireGuard.
        case wireGuard(WireGuardPublicKey)
        /// WireGuard from an unknown source: dropped.
        case unverified
    }

    let discoKey: X25519PrivateKey
    let nodeKey: X25519PublicKey
    private(set) var peers: [WireGuardPublicKey: Peer] = [:]
    /// Verified UDP sources (a ping from an unambiguous sender, or a pong to our ping): at
    /// most ``maxSourcesPerPeer`` per peer, a peer's least recently heard one replaced by its
    /// new one (so one peer's pings from many addresses never push out another peer's), and
    /// at most ``maxSources`` in all, the least recently heard replaced.
    private(set) var sources: [DiscoEndpoint: WireGuardPublicKey] = [:]
    private var sourceOrder: [DiscoEndpoint] = []
    static let maxSources = 1024
    static let maxSourcesPerPeer = 16
    /// Endpoints blocked (`disable_direct_connections`): DERP only, nothing over UDP.
    private(set) var blocked = false
    private(set) var servers: [STUNServer] = []
    private(set) var run: NetcheckRun?
    private(set) var lastReport: NetcheckResult?
    private(set) var lastReportAt: WireGuardInstant?
    /// Another report was asked for while one ran.
    private var reportQueued = false
    private var nextReSTUN: WireGuardInstant?
    /// When the tunnel last carried a packet (periodic STUN runs only while active).
    private var lastActivity: WireGuardInstant?
    private(set) var ports: (v4: UInt16?, v6: UInt16?) = (nil, nil)
    private(set) var fixedPort: UInt16?
    private(set) var published: [DiscoEndpoint] = []
    private(set) var endpointsRefreshedAt: WireGuardInstant?
    /// Peers whose CallMeMaybe waits for the report that refreshes our endpoints (at most
    /// one entry per peer).
    private(set) var callMeMaybeWaiting: Set<WireGuardPublicKey> = []
    private var endpointList = EndpointList()
    /// Interface addresses, read by the owner (tests inject them).
    var localAddresses: @Sendable () -> [DiscoEndpoint] = { LocalAddresses.current() }
    /// Counters for status and metrics.
    private(set) var counters = DirectCounters()
    /// Disco over DERP from a key no peer holds costs a key agreement (and one more for the
    /// pong): at most this many are opened per second; the rest are dropped and counted.
    static let maxUnknownOpensPerSecond = 50
    private var unknownOpens: (second: UInt64, count: Int) = (0, 0)
    /// The last TxID of every Ping over DERP, and of UDP sources the candidate table turned
    /// away: a Ping repeating it is not answered (bounded, see ``RecentPings``).
    private(set) var recentPings = RecentPings()

    init(discoKey: X25519PrivateKey, nodeKey: X25519PublicKey) {
        self.discoKey = discoKey
        self.nodeKey = nodeKey
    }

    // MARK: Configuration

    /// The UDP sockets' ports (nil: that family has no socket); `fixed` is the configured
    /// listen port (0/nil: random).
    mutating func setPorts(v4: UInt16?, v6: UInt16?, fixed: UInt16?) {
        ports = (v4, v6)
        fixedPort = fixed
    }

    /// The DERP map's STUN targets changed: a report runs.
    mutating func setServers(_ servers: [STUNServer], now: WireGuardInstant, random: inout some RandomNumberGenerator, into out: inout DirectOutput) {
        self.servers = servers
        requestReport(now: now, random: &random, into: &out)
    }

    /// Blocks or unblocks direct paths (applied live): blocked, every peer is DERP only, our
    /// endpoints are withdrawn, peers' endpoints and disco over UDP ignored.
    mutating func setBlocked(_ value: Bool, now: WireGuardInstant, random: inout some RandomNumberGenerator, into out: inout DirectOutput) {
        guard value != blocked else { return }
        blocked = value
        if value {
            for key in Array(peers.keys) { peers[key]?.path.reset() }
            sources = [:]
            sourceOrder = []
            callMeMaybeWaiting = []
            publishEndpoints(now: now, into: &out)
        } else {
            for key in Array(peers.keys) {
                if let endpoints = peers[key]?.nodeEndpoints { peers[key]?.path.setNodeEndpoints(endpoints) }
            }
            requestReport(now: now, random: &random, into: &out)
            publishEndpoints(now: now, into: &out)
        }
    }

    // MARK: Peers

    /// A peer's Node arrived or changed. A new disco key starts its path over (DERP only).
    mutating func upsertPeer(
        _ key: WireGuardPublicKey, disco: X25519PublicKey, homeRegion: Int32, endpoints: [DiscoEndpoint],
        now: WireGuardInstant, random: inout some RandomNumberGenerator, into out: inout DirectOutput
    ) {
        let wasEmpty = peers.isEmpty
        var peer = peers[key] ?? Peer(disco: disco, shared: NaClBox.sharedKey(disco, discoKey), homeRegion: homeRegion, nodeEndpoints: [])
        if peer.disco != disco {
            peer.path.reset()
            peer.disco = disco
            peer.shared = NaClBox.sharedKey(disco, discoKey)
            forgetSources(of: key)
        }
        peer.homeRegion = homeRegion
        peer.nodeEndpoints = Array(endpoints.prefix(PeerPath.maxCandidates))
        if !blocked { peer.path.setNodeEndpoints(peer.nodeEndpoints) }
        peers[key] = peer
        if wasEmpty { requestReport(now: now, random: &random, into: &out) }
    }

    mutating func removePeer(_ key: WireGuardPublicKey) {
        peers[key] = nil
        callMeMaybeWaiting.remove(key)
        forgetSources(of: key)
    }

    // MARK: Sending

    /// Where a WireGuard datagram for `peer` goes; pings and a CallMeMaybe are added to `out`
    /// when the path is not trusted.
    mutating func route(to key: WireGuardPublicKey, now: WireGuardInstant, random: inout some RandomNumberGenerator, into out: inout DirectOutput) -> PeerPath.Route {
        lastActivity = now
        guard !blocked, let (route, actions) = updatePath(key, { $0.send(now: now, random: &random) }) else { return .derp }
        perform(actions, for: key, now: now, random: &random, into: &out)
        return route
    }

    /// The tunnel carried a packet in (keeps periodic STUN going).
    mutating func noteActivity(now: WireGuardInstant) { lastActivity = now }

    // MARK: Receiving

    /// A datagram from the UDP socket, demultiplexed: STUN, disco, else WireGuard (passed on
    /// only from a verified source).
    mutating func receiveUDP(
        _ bytes: [UInt8], from source: DiscoEndpoint, now: WireGuardInstant,
        random: inout some RandomNumberGenerator, into out: inout DirectOutput
    ) -> Verdict {
        if STUN.looksLikeSTUN(bytes) {
            if run?.receive(bytes, now: now) == true {
                counters.stunReplies += 1
                if run?.isDone == true { finishReport(now: now, random: &random, into: &out) }
            }
            return .stun
        }
        if Disco.looksLikeDisco(bytes) {
            guard !blocked else { return .disco }
            handleUDPDisco(bytes, from: source, now: now, random: &random, into: &out)
            return .disco
        }
        guard let key = sources[source], peers[key] != nil else {
            return .unverified
        }
        lastActivity = now
        return .wireGuard(key)
    }

    private mutating func handleUDPDisco(
        _ bytes: [UInt8], from source: DiscoEndpoint, now: WireGuardInstant,
        random: inout some RandomNumberGenerator, into out: inout DirectOutput
    ) {
        // The sender must be a peer's disco key before any cryptography is spent on it.
        guard let sender = Disco.sender(of: bytes) else { return }
        let holders = peers.filter { $0.value.disco == sender }.map(\.key)
        guard let first = holders.first, let shared = peers[first]?.shared else {
            counters.discoUnknownSender += 1
            return
        }
        guard let received = try? Disco.open(bytes, shared: shared, sender: sender) else {
            counters.discoCannotOpen += 1
            return
        }
        switch received.message {
        case .ping(let txID, let claimed):
            let key: WireGuardPublicKey?
            if let claimed, let match = holders.first(where: { $0.bytes == claimed.bytes }) {
                key = match
            } else {
                key = holders.count == 1 ? holders[0] : nil
            }
            guard let key else {
                counters.discoDropped += 1
                return
            }
            // A copy of a Ping answered from another address: no Pong, and not the peer's.
            guard !recentPings.isCopy(txID, from: RecentPings.Source(sender: sender, via: .udp(source)), now: now) else {
                counters.pingsRepeated += 1
                return
            }
            learn(source, for: key)
            // A repeat of the last TxID from this address gets no answer: the candidate
            // remembers it, or, when a full table could not keep the address, the memory of
            // recent pings does.
            var repeated = peers[key]?.path.pingReceived(from: source, txID: txID, now: now) != true
            if !repeated, peers[key]?.path.candidates[source] == nil {
                repeated = recentPings.isRepeat(txID, from: RecentPings.Source(sender: sender, via: .udp(source)), now: now)
            }
            guard !repeated else {
                counters.pingsRepeated += 1
                return
            }
            let pong = DiscoMessage.pong(txID: txID, address: source.address, port: source.port)
            if let sealed = Disco.seal(pong, shared: shared, ours: discoKey.publicKey) {
                out.udp.append((source, sealed))
                counters.pongsSent += 1
            }
        case .pong(let txID, _, _):
            for key in holders where updatePath(key, { $0.pongReceived(txID: txID, now: now) }) == true {
                learn(source, for: key)
                counters.pongsReceived += 1
                break
            }
        case .callMeMaybe:
            // Only valid over DERP.
            counters.discoDropped += 1
        }
    }

    /// A disco packet received over DERP from `sourceKey` (the relay's source node key):
    /// Pings answered over DERP (source 127.3.3.40:<region>), CallMeMaybe acted on. False when
    /// the packet is not disco.
    mutating func receiveDERPDisco(
        _ bytes: [UInt8], from sourceKey: WireGuardPublicKey, region: Int32, now: WireGuardInstant,
        random: inout some RandomNumberGenerator, into out: inout DirectOutput
    ) -> Bool {
        guard Disco.looksLikeDisco(bytes) else { return false }
        // A known peer's key opens with its precomputed box key; others (a CLI ping from a
        // client the coordinator has not introduced yet) with a key agreement.
        guard let sender = Disco.sender(of: bytes) else { return true }
        let shared = peers[sourceKey].flatMap { $0.disco == sender ? $0.shared : nil }
        let opened: Disco.Received?
        if let shared {
            opened = try? Disco.open(bytes, shared: shared, sender: sender)
        } else {
            let second = now.nanoseconds / 1_000_000_000
            if unknownOpens.second != second { unknownOpens = (second, 0) }
            guard unknownOpens.count < Self.maxUnknownOpensPerSecond else {
                counters.discoUnknownSender += 1
                return true
            }
            unknownOpens.count += 1
            opened = try? Disco.open(bytes, privateKey: discoKey)
        }
        guard let received = opened else {
            counters.discoCannotOpen += 1
            return true
        }
        switch received.message {
        case .ping(let txID, _):
            // A repeat of the last TxID this sender sent through this relay and region gets
            // no answer (magicsock's candidate for it is 127.3.3.40:<region>).
            let source = RecentPings.Source(sender: received.sender, via: .derp(node: sourceKey, region: region))
            guard !recentPings.isRepeat(txID, from: source, now: now) else {
                counters.pingsRepeated += 1
                return true
            }
            if let pong = Disco.pong(answering: received, privateKey: discoKey, regionID: Int(region)) {
                out.derp.append((sourceKey, pong))
                counters.pongsSent += 1
            }
        case .pong:
            break
        case .callMeMaybe(let endpoints):
            guard !blocked, let peer = peers[sourceKey], peer.disco == received.sender else {
                counters.discoDropped += 1
                return true
            }
            counters.callMeMaybeReceived += 1
            let actions = updatePath(sourceKey) { $0.callMeMaybe(endpoints, now: now, random: &random) } ?? []
            perform(actions, for: sourceKey, now: now, random: &random, into: &out)
        }
        return true
    }

    /// What became of a datagram of ``DirectOutput/udp`` (the owner reports every one): a
    /// STUN request tells the report whether its family can send (a request merely queued
    /// does not) or, failed, is not waited for; a disco datagram that was not sent makes the
    /// pings to `endpoint` forgotten at once.
    mutating func sendResult(_ bytes: [UInt8], to endpoint: DiscoEndpoint, outcome: UDPSendOutcome) {
        if STUN.looksLikeSTUN(bytes) {
            // Bytes 8–19 of a request are its transaction ID.
            run?.sendResult(txID: Array(bytes[8..<(8 + STUN.txIDLength)]), outcome: outcome)
            return
        }
        guard outcome != .sent else { return }
        for key in Array(peers.keys) {
            guard let outstanding = peers[key]?.path.outstanding else { continue }
            for (txID, ping) in outstanding where ping.to == endpoint { peers[key]?.path.pingFailed(txID: txID) }
        }
    }

    // MARK: Time

    /// Heartbeats, ping expiry, the report's budget and the periodic re-STUN.
    mutating func tick(now: WireGuardInstant, random: inout some RandomNumberGenerator, into out: inout DirectOutput) {
        for key in Array(peers.keys) {
            let blocked = self.blocked
            let actions =
                updatePath(key) { path -> [PeerPath.Action] in
                    path.expire(now: now)
                    return blocked ? [] : path.heartbeat(now: now, random: &random)
                } ?? []
            perform(actions, for: key, now: now, random: &random, into: &out)
        }
        if let run, now >= run.deadline { finishReport(now: now, random: &random, into: &out) }
        if run == nil, let due = nextReSTUN, now >= due {
            nextReSTUN = nil
            let active = lastActivity.map { now.since($0) <= DirectTimers.sessionActiveTimeout } ?? false
            if active, !peers.isEmpty { requestReport(now: now, random: &random, into: &out) }
        }
    }

    /// The earliest instant ``tick(now:random:into:)`` has work.
    var nextDeadline: WireGuardInstant? {
        var earliest = DirectTimers.earliest(run?.deadline, nextReSTUN)
        for peer in peers.values { earliest = DirectTimers.earliest(earliest, peer.path.nextDeadline) }
        return earliest
    }

    // MARK: STUN and endpoints

    /// Starts a report now, or queues one after the report that is running.
    mutating func requestReport(now: WireGuardInstant, random: inout some RandomNumberGenerator, into out: inout DirectOutput) {
        if run != nil {
            reportQueued = true
            return
        }
        let families = servers.filter { ($0.endpoint.isIPv4 && ports.v4 != nil) || (!$0.endpoint.isIPv4 && ports.v6 != nil) }
        guard !families.isEmpty else {
            publishEndpoints(now: now, into: &out)
            return
        }
        let started = NetcheckRun(servers: families, now: now, random: &random)
        // Whether a family can send is known once the owner reports the sends.
        for (server, bytes) in started.requests { out.udp.append((server.endpoint, bytes)) }
        counters.stunRequests += started.pending.count
        run = started
    }

    private mutating func finishReport(now: WireGuardInstant, random: inout some RandomNumberGenerator, into out: inout DirectOutput) {
        guard let finished = run else { return }
        run = nil
        lastReport = finished.report
        lastReportAt = now
        let spread = DirectTimers.reSTUNMaximum - DirectTimers.reSTUNMinimum
        nextReSTUN = now.adding(nanoseconds: DirectTimers.reSTUNMinimum + UInt64.random(in: 0...spread, using: &random))
        publishEndpoints(now: now, into: &out)
        let waiting = callMeMaybeWaiting
        callMeMaybeWaiting = []
        for key in waiting.sorted(by: { $0.bytes.lexicographicallyPrecedes($1.bytes) }) { sendCallMeMaybe(to: key, into: &out) }
        if reportQueued {
            reportQueued = false
            requestReport(now: now, random: &random, into: &out)
        }
    }

    /// Recomputes the endpoint list; `out.publish` is set when the set changed.
    private mutating func publishEndpoints(now: WireGuardInstant, into out: inout DirectOutput) {
        let list =
            blocked
            ? []
            : endpointList.determine(
                report: lastReport, local: localAddresses(), v4Port: ports.v4, v6Port: ports.v6, fixedPort: fixedPort, now: now)
        endpointsRefreshedAt = now
        guard Set(list) != Set(published) else { return }
        out.publish = list
        published = list
    }

    // MARK: Internals

    /// Runs `body` on `key`'s path in place (no copy of its tables), counting the path
    /// changes it made; nil for an unknown peer.
    private mutating func updatePath<T>(_ key: WireGuardPublicKey, _ body: (inout PeerPath) -> T) -> T? {
        guard let before = peers[key]?.path.switches else { return nil }
        let result = body(&peers[key]!.path)
        counters.pathSwitches += peers[key]!.path.switches - before
        return result
    }

    private mutating func perform(
        _ actions: [PeerPath.Action], for key: WireGuardPublicKey, now: WireGuardInstant,
        random: inout some RandomNumberGenerator, into out: inout DirectOutput
    ) {
        guard let peer = peers[key] else { return }
        for action in actions {
            switch action {
            case .ping(let endpoint, let txID):
                if let shared = peer.shared, let sealed = Disco.seal(.ping(txID: txID, nodeKey: nodeKey), shared: shared, ours: discoKey.publicKey) {
                    out.udp.append((endpoint, sealed))
                    counters.pingsSent += 1
                }
            case .callMeMaybe:
                // Endpoints older than 27 s are refreshed first; the CallMeMaybe follows the
                // report (``finishReport``), so the peer pings where we are now.
                if endpointsRefreshedAt.map({ now.since($0) > DirectTimers.endpointsFreshEnough }) ?? true {
                    requestReport(now: now, random: &random, into: &out)
                }
                if run != nil {
                    callMeMaybeWaiting.insert(key)
                } else {
                    sendCallMeMaybe(to: key, into: &out)
                }
            }
        }
    }

    /// Our endpoints, over DERP, to `key`.
    private mutating func sendCallMeMaybe(to key: WireGuardPublicKey, into out: inout DirectOutput) {
        guard !blocked, let shared = peers[key]?.shared else { return }
        let endpoints = published.map { DiscoEndpoint(address: $0.address, port: $0.port) }
        if let sealed = Disco.seal(.callMeMaybe(endpoints), shared: shared, ours: discoKey.publicKey) {
            out.derp.append((key, sealed))
            counters.callMeMaybeSent += 1
        }
    }

    /// A verified source of `key`'s; one heard again moves to the back, so a full map gives
    /// up the source heard from least recently (the peer's own first), never one in use.
    private mutating func learn(_ source: DiscoEndpoint, for key: WireGuardPublicKey) {
        if sources[source] != key {
            let own = sourceOrder.indices.filter { sources[sourceOrder[$0]] == key }
            if own.count >= Self.maxSourcesPerPeer, let oldest = own.first {
                sources[sourceOrder.remove(at: oldest)] = nil
            }
        }
        if sources[source] == nil {
            if sourceOrder.count >= Self.maxSources {
                let oldest = sourceOrder.removeFirst()
                sources[oldest] = nil
            }
            sourceOrder.append(source)
        } else if sourceOrder.last != source, let index = sourceOrder.lastIndex(of: source) {
            sourceOrder.remove(at: index)
            sourceOrder.append(source)
        }
        sources[source] = key
    }

    private mutating func forgetSources(of key: WireGuardPublicKey) {
        let gone = sources.filter { $0.value == key }.map(\.key)
        for source in gone { sources[source] = nil }
        if !gone.isEmpty { sourceOrder.removeAll { gone.contains($0) } }
    }
}

/// What the direct-path logic counted (status page and metrics).
struct DirectCounters: Sendable, Equatable {
    var pingsSent = 0
    var pongsSent = 0
    /// Pings not answered because they repeated the last TxID from their source.
    var pingsRepeated = 0
    var pongsReceived = 0
    var callMeMaybeSent = 0
    var callMeMaybeReceived = 0
    /// Disco dropped: from a key no peer holds (no cryptography spent), a box that does not
    /// open, or a message that is not valid where it came (a CallMeMaybe over UDP, ...).
    var discoUnknownSender = 0
    var discoCannotOpen = 0
    var discoDropped = 0
    var stunRequests = 0
    var stunReplies = 0
    var pathSwitches = 0
}
