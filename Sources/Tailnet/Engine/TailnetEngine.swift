import AgentCore
import AgentHTTP
import AgentProto
import CoreMetrics
import DERP
import Logging
import NIOCore
import NIOPosix
import Synchronization
import TunnelStack
import WireGuard

/// The tailnet's data path and its relay connections: (DERP | direct UDP) ⇄ WireGuard ⇄
/// (TSMP | the tunnel's TCP/IPv6 stack). ``DirectPaths`` decides per peer whether a
/// WireGuard datagram goes over DERP, over UDP, or both; the UDP sockets (``MagicSocket``)
/// carry STUN, disco and WireGuard from disco-verified sources. One per agent, made on the first manifest and kept across
/// control-plane sessions (the keys stay, so peers keep their WireGuard sessions).
///
/// Threads: the engine is confined to one event loop (``eventLoop``, from the agent's
/// group): the tunnel stack (lwIP) runs there, the DERP clients' connections run there (so
/// a packet goes DERP → WireGuard → lwIP → the tunnel channel and back without crossing a
/// thread), and the timer's ticks are carried out there. The WireGuard device still sits
/// behind a mutex, uncontended on the data path, for the status and peer updates that come
/// from other threads; it is never held while calling out (into the stack, a DERP client or
/// the log): each operation collects its output in a sink, unlocks, then hands it on.
///
/// Timers: one task sleeps until the device's next deadline (re-armed when an operation
/// makes it earlier); with nothing pending it waits without waking (no polling).
final class TailnetEngine: Sendable {
    let addresses: TailnetAddresses
    let nodeKey: WireGuardPrivateKey
    let derpKey: X25519PrivateKey
    let discoKey: X25519PrivateKey
    let announcer: NodeAnnouncer
    let metrics: TailnetMetrics
    /// Every packet through the tunnel, by flow (the stats report's honest connection count).
    let traffic: TunnelTraffic
    /// The loop the data path runs on (lwIP's, the DERP connections', the timer's ticks).
    let eventLoop: any EventLoop
    private let logger: Logger
    private let device: Mutex<WireGuardDevice>
    private let stackBox = Mutex<TunnelStack?>(nil)
    private let origin = ContinuousClock.now
    private let timerSignal = WorkSignal()
    /// The deadline the timer task sleeps toward (nanoseconds on the engine's clock; max: none).
    private let armed = Atomic<UInt64>(.max)
    private let relays = Mutex(RelayTable())
    private let forceWebSocket: Bool
    private let timerTask = Mutex<Task<Void, Never>?>(nil)
    private let direct: Mutex<DirectPaths>
    /// The DERP map's STUN nodes, and the host names among them resolved off the loop.
    private let stunTargets = Mutex(STUNTargets(Coder_Tailnet_V2_DERPMap()))
    private let stunResolver: STUNResolver
    private let stunResolving = Atomic<Bool>(false)
    private let magic = Mutex<MagicSocket?>(nil)
    /// `--tailnet-listen-port` (0: random).
    private let listenPort: UInt16
    /// Inbound packets since the tunnel stack's metrics were last recorded: on every 64th
    /// inbound packet, by the status route and before each scrape, not on a timer.
    private let packetsSinceGauge = Atomic<Int>(0)

    /// Relay connections: the home region's and those opened to reach peers homed elsewhere.
    struct RelayTable: Sendable {
        var map = Coder_Tailnet_V2_DERPMap()
        var home: Int32 = 0
        var clients: [Int32: DERPClient] = [:]
        /// Each peer's home region (from its Node) and the region it was last heard on.
        var peerHome: [WireGuardPublicKey: Int32] = [:]
        var lastHeard: [WireGuardPublicKey: Int32] = [:]
        /// Connections to regions other than home: at most this many (peers are coderd
        /// replicas and a few clients).
        static let maxExtraRegions = 8
    }

    init(
        addresses: TailnetAddresses, nodeKey: WireGuardPrivateKey, discoKey: X25519PrivateKey, forceWebSocket: Bool,
        listenPort: UInt16 = 0, blockEndpoints: Bool = false, announcer: NodeAnnouncer, metrics: TailnetMetrics, traffic: TunnelTraffic = TunnelTraffic(),
        eventLoop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next(), stunResolver: STUNResolver = STUNResolver(), logger: Logger
    ) {
        self.traffic = traffic
        self.stunResolver = stunResolver
        self.eventLoop = eventLoop
        self.addresses = addresses
        self.nodeKey = nodeKey
        self.derpKey = X25519PrivateKey(nodeKey.raw.bytes)!
        self.discoKey = discoKey
        self.announcer = announcer
        self.metrics = metrics
        self.logger = logger
        self.forceWebSocket = forceWebSocket
        self.listenPort = listenPort
        var paths = DirectPaths(discoKey: discoKey, nodeKey: X25519PublicKey(nodeKey.publicKey.bytes)!)
        var unused = DirectOutput()
        var random = SystemRandomNumberGenerator()
        paths.setBlocked(blockEndpoints, now: .zero, random: &random, into: &unused)
        self.direct = Mutex(paths)
        var configuration = WireGuardConfiguration(privateKey: nodeKey)
        configuration.mtu = 1280
        self.device = Mutex(WireGuardDevice(configuration: configuration))
    }

    /// Starts the tunnel stack (port 4's channels served by `acceptor`, when it takes
    /// channels; else port 4 is reset; the ports of `ports` by their services) and the
    /// timer task.
    func start(acceptor: any ConnectionAcceptor, ports: TunnelPortServices = TunnelPortServices()) throws(TunnelStackError) {
        var acceptors: [UInt16: TunnelAcceptor] = [:]
        for (port, serve) in ports.all {
            acceptors[port] = TunnelAcceptor { [logger] channel in
                let remote = channel.remoteAddress.map { "[\($0.ipAddress ?? "")]:\($0.port ?? 0)" }
                let served = serve(channel, remote)
                served.whenFailure { error in
                    logger.warning("tunnel connection not served", metadata: ["port": "\(port)", "error": "\(error)"])
                }
                return served
            }
        }
        if let channels = acceptor as? any ChannelAcceptor {
            acceptors[TunnelStackConfiguration().httpPort] = TunnelAcceptor { [logger] channel in
                let remote = channel.remoteAddress.map { "[\($0.ipAddress ?? "")]:\($0.port ?? 0)" }
                let served = channels.serve(channel, listener: ListenerName.tailnet, remote: remote)
                served.whenFailure { error in
                    logger.warning("tunnel connection to port 4 not served", metadata: ["error": "\(error)"])
                }
                return served
            }
        } else {
            logger.warning("no HTTP API takes tunnel connections: port 4 is reset")
        }
        let stack = try TunnelStack(
            addresses: [TunnelAddress(bytes: addresses.primary)!, TunnelAddress(bytes: addresses.coder)!],
            eventLoop: eventLoop,
            output: { [weak self] packet in self?.sendFromStack(packet) },
            acceptors: acceptors)
        stackBox.withLock { $0 = stack }
        let task = Task<Void, Never> { [weak self] in
            await self?.bindUDP()
            await self?.runTimers()
        }
        timerTask.withLock { $0 = task }
    }

    /// Binds the UDP sockets; without them the engine stays on DERP (logged).
    private func bindUDP() async {
        do {
            let socket = try await MagicSocket.bind(port: listenPort, eventLoop: eventLoop) { [weak self] buffer, source in
                self?.receiveUDP(buffer, from: source)
            }
            magic.withLock { $0 = socket }
            logger.info("tailnet UDP bound", metadata: ["v4": "\(socket.v4Port.map(String.init) ?? "none")", "v6": "\(socket.v6Port.map(String.init) ?? "none")"])
            let out = withDirect { d, now, random, out in
                d.setPorts(v4: socket.v4Port, v6: socket.v6Port, fixed: listenPort == 0 ? nil : listenPort)
                d.requestReport(now: now, random: &random, into: &out)
            }
            perform(out)
        } catch {
            logger.warning("tailnet UDP not bound: DERP only", metadata: ["port": "\(listenPort)", "error": "\(error)"])
        }
    }

    /// Ends everything: relay connections, the stack, the timer.
    func stop() async {
        timerTask.withLock { $0 }?.cancel()
        let clients = relays.withLock { r in
            defer { r.clients = [:] }; return Array(r.clients.values)
        }
        for client in clients { await client.close() }
        if let socket = magic.withLock({ m in
            defer { m = nil }; return m
        }) {
            await socket.close()
        }
        if let stack = stackBox.withLock({ s in
            defer { s = nil }; return s
        }) {
            await stack.shutdown()
            metrics.record(stack)
        }
    }

    /// The stack's counters now, recorded into the metrics on the way (nil: no stack yet).
    func recordStackMetrics() -> TunnelStackCounters? {
        stackBox.withLock { $0 }.map { metrics.record($0) }
    }
    var wireGuardCounters: WireGuardCounters { device.withLock { $0.counters } }
    var homeRegion: Int32 { relays.withLock { $0.home } }
    var relayStates: [Int32: DERPClientState] { relays.withLock { $0.clients.mapValues(\.state) } }
    var relayStatistics: [Int32: DERPClientStatistics] { relays.withLock { $0.clients.mapValues(\.statistics) } }

    func peerStatus() -> [(key: WireGuardPublicKey, status: WireGuardPeerStatus)] {
        device.withLock { d in d.peerKeys.compactMap { key in d.status(of: key).map { (key, $0) } } }
    }

    /// How long ago the WireGuard peer with node key `nodeKey` last completed a handshake;
    /// nil if it never did, or there is no such peer.
    func sinceHandshake(_ nodeKey: [UInt8]) -> Duration? {
        guard let key = WireGuardPublicKey(bytes: nodeKey) else { return nil }
        let now = now()
        return device.withLock { $0.status(of: key)?.lastHandshake }.map { .nanoseconds(Int64(clamping: now.since($0))) }
    }

    /// Now on the engine's monotonic clock (WireGuard's time).
    var instant: WireGuardInstant { now() }

    private func now() -> WireGuardInstant {
        let elapsed = ContinuousClock.now - origin
        let (seconds, attoseconds) = elapsed.components
        return WireGuardInstant(nanoseconds: UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds / 1_000_000_000)))
    }

    // MARK: Peers

    /// Applies the coordination's peer changes to WireGuard and the relay routing.
    func apply(_ changes: [CoordinationState.Change]) {
        for change in changes {
            switch change {
            case .upsert(let peer):
                guard let key = WireGuardPublicKey(bytes: peer.nodeKey) else { continue }
                let allowed = peer.allowedIPs.compactMap { WireGuard.IPPrefix($0.description) }
                let configuration = WireGuardPeerConfiguration(publicKey: key, allowedIPs: allowed)
                let result = device.withLock { d -> (any Error)? in
                    do { try d.setPeer(configuration); return nil } catch { return error }
                }
                if let result {
                    logger.warning("peer not configured", metadata: ["peer": "\(key)", "error": "\(result)"])
                    continue
                }
                relays.withLock { $0.peerHome[key] = peer.homeRegion }
                if let disco = X25519PublicKey(peer.discoKey) {
                    let out = withDirect { d, now, random, out in
                        d.upsertPeer(key, disco: disco, homeRegion: peer.homeRegion, endpoints: peer.endpoints, now: now, random: &random, into: &out)
                    }
                    perform(out)
                }
            case .remove(_, let nodeKey):
                guard let key = WireGuardPublicKey(bytes: nodeKey) else { continue }
                device.withLock { $0.removePeer(key) }
                direct.withLock { $0.removePeer(key) }
                relays.withLock { r in
                    r.peerHome[key] = nil
                    r.lastHeard[key] = nil
                }
            }
        }
        metrics.peers.record(device.withLock { $0.peerKeys.count })
        rearm()
    }

    // MARK: Relays

    /// Applies a (rewritten) DERP map: picks the home region and connects to it when it changed.
    func apply(map: Coder_Tailnet_V2_DERPMap) {
        let (home, previous) = relays.withLock { r -> (Int64?, DERPClient?) in
            r.map = map
            let home = HomeRegion.choose(in: map, current: r.home == 0 ? nil : Int64(r.home))
            guard let home, Int32(home) != r.home || r.clients[r.home] == nil else { return (nil, nil) }
            let previous = r.clients.removeValue(forKey: r.home)
            r.home = Int32(home)
            return (home, previous)
        }
        if let previous { Task { await previous.close() } }
        let targets = STUNTargets(map)
        stunTargets.withLock { $0 = targets }
        applySTUN(targets, resolved: stunResolver.cached(targets.hostNames).addresses)
        refreshSTUNNames()
        guard let home else { return }
        guard let client = makeClient(region: Int32(home), isHome: true) else { return }
        relays.withLock { $0.clients[Int32(home)] = client }
        client.start()
    }

    /// Probes `targets` from now on, its host names as `resolved` (unless a newer map came).
    private func applySTUN(_ targets: STUNTargets, resolved: [String: STUNResolver.Addresses]) {
        let servers = targets.servers(resolved: resolved)
        guard stunTargets.withLock({ $0 == targets }), servers != direct.withLock({ $0.servers }) else { return }
        perform(withDirect { d, now, random, out in d.setServers(servers, now: now, random: &random, into: &out) })
        rearm()
    }

    /// Looks up the STUN host names whose answers are missing or older than the resolver's
    /// TTL, one batch at a time, then probes what they resolved to (on the loop).
    private func refreshSTUNNames() {
        let targets = stunTargets.withLock { $0 }
        let names = targets.hostNames
        guard !names.isEmpty, stunResolver.cached(names).stale,
            !stunResolving.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).original
        else { return }
        Task { [weak self, stunResolver] in
            let resolved = await stunResolver.resolve(names)
            guard let self else { return }
            self.stunResolving.store(false, ordering: .releasing)
            if let resolved {
                if resolved.isEmpty { self.logger.info("tailnet STUN host names resolved to nothing", metadata: ["names": "\(names)"]) }
                self.eventLoop.execute { self.applySTUN(targets, resolved: resolved) }
            }
            // A map that came during the lookup has its own names.
            if self.stunTargets.withLock({ $0 != targets }) { self.refreshSTUNNames() }
        }
    }

    private func makeClient(region: Int32, isHome: Bool) -> DERPClient? {
        guard let regionMap = relays.withLock({ $0.map.regions[Int64(region)] }) else { return nil }
        let nodes = HomeRegion.dialable(regionMap).map { node in
            DERPNode(
                name: node.name, regionID: Int(region), hostName: node.hostName, certName: node.certName,
                ipv4: node.ipv4, ipv6: node.ipv6, derpPort: Int(node.derpPort), forceHTTP: node.forceHTTP,
                insecureForTests: node.insecureForTests, stunOnly: node.stunOnly)
        }
        guard !nodes.isEmpty else { return nil }
        var configuration = DERPClient.Configuration()
        configuration.forceWebSocket = forceWebSocket
        configuration.isHome = isHome
        let holder = ClientHolder()
        let client = DERPClient(
            privateKey: derpKey, nodes: nodes, configuration: configuration, logger: logger, group: eventLoop,
            packetHandler: { [weak self] packet in
                guard let self, let client = holder.client else { return }
                if Disco.looksLikeDisco(packet.packet) {
                    self.receiveRelayedDisco(packet, region: region, via: client)
                    return
                }
                self.receive(packet, region: region)
            })
        holder.client = client
        Task { [weak self] in
            for await event in client.events {
                self?.handle(event, region: region, isHome: isHome)
            }
        }
        return client
    }

    private func handle(_ event: DERPClientEvent, region: Int32, isHome: Bool) {
        switch event {
        case .connected(_, let transport):
            metrics.derpConnects.increment()
            logger.info("DERP connected", metadata: ["region": "\(region)", "transport": "\(transport)"])
            guard isHome else { return }
            announcer.update { node in
                node.preferredDERP = region
                if case .webSocket(let reason) = transport {
                    node.forcedWebSocket = [region: reason]
                } else {
                    node.forcedWebSocket = [:]
                }
            }
        case .disconnected(let reason):
            metrics.derpDisconnects.increment()
            logger.info("DERP disconnected", metadata: ["region": "\(region)", "reason": "\(reason)"])
            // The home relay lost: the network may have changed under us (a re-STUN trigger).
            guard isHome else { return }
            perform(withDirect { d, now, random, out in d.requestReport(now: now, random: &random, into: &out) })
            rearm()
        case .health(let text):
            if let text { logger.warning("DERP relay health", metadata: ["region": "\(region)", "problem": "\(text)"]) }
        case .peerGone, .restarting:
            break
        }
    }

    /// Where to send to `peer`: a connection to its home region, else the region it was last
    /// heard on, else a new connection to its home region (bounded), else home.
    private func client(for peer: WireGuardPublicKey) -> DERPClient? {
        let (found, dial) = relays.withLock { r -> (DERPClient?, Int32?) in
            if let region = r.peerHome[peer], let client = r.clients[region] { return (client, nil) }
            if let region = r.lastHeard[peer], let client = r.clients[region] { return (client, nil) }
            if let region = r.peerHome[peer], r.map.regions[Int64(region)] != nil,
                r.clients.count <= RelayTable.maxExtraRegions
            {
                return (nil, region)
            }
            return (r.clients[r.home], nil)
        }
        if let found { return found }
        guard let dial, let client = makeClient(region: dial, isHome: false) else { return nil }
        let winner = relays.withLock { r -> DERPClient in
            if let existing = r.clients[dial] { return existing }
            r.clients[dial] = client
            return client
        }
        if winner === client { client.start() }
        return winner
    }

    // MARK: Packets

    /// A packet from a relay: WireGuard, then TSMP or the stack.
    private func receive(_ packet: DERPReceivedPacket, region: Int32) {
        guard let peer = WireGuardPublicKey(bytes: packet.source.bytes) else { return }
        metrics.bytesDERPIn.increment(by: Int64(packet.packet.count))
        receiveWireGuard(packet.packet, from: peer, region: region)
    }

    /// A WireGuard datagram from `peer` (over DERP from `region`, or over UDP: nil).
    private func receiveWireGuard(_ datagram: [UInt8], from peer: WireGuardPublicKey, region: Int32?) {
        var sink = EngineSink()
        let result = device.withLock { $0.receive(datagram, from: peer, now: now(), into: &sink) }
        switch result {
        case .dropped(let reason): metrics.dropped(reason)
        case .initiationAnswered, .handshakeCompleted: metrics.handshakes.increment()
        default: break
        }
        if let region, !result.isDropped { relays.withLock { $0.lastHeard[peer] = region } }
        flush(&sink)
    }

    /// Disco over DERP: Pings answered on the connection they came on, CallMeMaybe acted on.
    private func receiveRelayedDisco(_ packet: DERPReceivedPacket, region: Int32, via client: DERPClient) {
        guard let source = WireGuardPublicKey(bytes: packet.source.bytes) else { return }
        var out = withDirect { d, now, random, out in
            _ = d.receiveDERPDisco(packet.packet, from: source, region: region, now: now, random: &random, into: &out)
        }
        let replies = out.derp.filter { $0.peer == source }
        out.derp.removeAll { $0.peer == source }
        for reply in replies {
            metrics.discoPings.increment()
            client.send(to: packet.source, packet: reply.bytes)
        }
        perform(out)
        rearm()
    }

    /// A datagram from the UDP socket (on the loop): STUN and disco go to the direct-path
    /// logic; WireGuard only from a source disco verified.
    private func receiveUDP(_ buffer: ByteBuffer, from source: DiscoEndpoint) {
        let bytes = Array(buffer.readableBytesView)
        var verdict = DirectPaths.Verdict.unverified
        let out = withDirect { d, now, random, out in
            verdict = d.receiveUDP(bytes, from: source, now: now, random: &random, into: &out)
        }
        perform(out)
        switch verdict {
        case .wireGuard(let peer):
            metrics.bytesDirectIn.increment(by: Int64(bytes.count))
            receiveWireGuard(bytes, from: peer, region: nil)
        case .unverified:
            metrics.unverifiedUDP.increment()
        case .stun, .disco:
            // A pong or a STUN answer can move the direct-path deadlines (re-STUN, pings).
            rearm()
        }
    }

    /// Runs one step of the direct-path logic under its lock, at the engine's now.
    private func withDirect(_ body: (inout DirectPaths, WireGuardInstant, inout SystemRandomNumberGenerator, inout DirectOutput) -> Void) -> DirectOutput {
        let now = now()
        let (out, before, after) = direct.withLock { d in
            var out = DirectOutput()
            var random = SystemRandomNumberGenerator()
            let before = d.counters
            body(&d, now, &random, &out)
            return (out, before, d.counters)
        }
        if before != after { metrics.record(from: before, to: after) }
        return out
    }

    /// Carries out what the direct-path logic asked for: UDP datagrams, disco over DERP, a
    /// new endpoint list in the Node.
    private func perform(_ out: DirectOutput) {
        if !out.udp.isEmpty {
            // Every outcome goes back to the direct-path logic, in one step: STUN reports
            // learn from them whether a family can send.
            let socket = magic.withLock { $0 }
            let outcomes = out.udp.map { socket?.send($0.bytes, to: $0.to) ?? .failed }
            direct.withLock { d in
                for (datagram, outcome) in zip(out.udp, outcomes) { d.sendResult(datagram.bytes, to: datagram.to, outcome: outcome) }
            }
        }
        for (peer, bytes) in out.derp { sendDERP(bytes, to: peer) }
        if let endpoints = out.publish {
            logger.info("tailnet endpoints", metadata: ["endpoints": "\(endpoints.map(\.description))"])
            announcer.update { $0.endpoints = endpoints.map(\.description) }
        }
    }

    /// Blocks or unblocks direct paths (the manifest's `disable_direct_connections`), live.
    func setBlockEndpoints(_ blocked: Bool) {
        perform(withDirect { d, now, random, out in d.setBlocked(blocked, now: now, random: &random, into: &out) })
        rearm()
    }

    /// Each peer's path, for the status route and the magicsock page.
    func directStatus() -> DirectStatus {
        let now = now()
        return direct.withLock { d in DirectStatus(d, now: now) }
    }

    var udpPorts: (v4: UInt16?, v6: UInt16?) { direct.withLock { $0.ports } }

    /// A packet the stack sends (on lwIP's loop, inside lwIP: never calls back into the stack).
    private func sendFromStack(_ packet: UnsafeRawBufferPointer) {
        var sink = EngineSink()
        let result = device.withLock { $0.send(packet, now: now(), into: &sink) }
        if case .dropped(let reason) = result {
            metrics.dropped(reason)
        } else {
            metrics.packetsOut.increment()
            metrics.bytesOut.increment(by: Int64(packet.count))
            traffic.record(packet: packet, inbound: false)
        }
        for (peer, datagram) in sink.datagrams { transmit(datagram, to: peer) }
        rearm()
    }

    private func flush(_ sink: inout EngineSink) {
        for (peer, datagram) in sink.datagrams { transmit(datagram, to: peer) }
        let delivered = sink.packets
        sink = EngineSink()
        for packet in delivered {
            if let pong = TSMP.pong(answering: packet) {
                // Answered before any filter, from the pinged address (AwaitReachable).
                metrics.tsmpPongs.increment()
                var reply = EngineSink()
                _ = device.withLock { $0.send(pong, now: now(), into: &reply) }
                for (peer, datagram) in reply.datagrams { transmit(datagram, to: peer) }
                continue
            }
            metrics.packetsIn.increment()
            metrics.bytesIn.increment(by: Int64(packet.count))
            packet.withUnsafeBytes { traffic.record(packet: $0, inbound: true) }
            guard let stack = stackBox.withLock({ $0 }) else { continue }
            stack.input(packet)
            if packetsSinceGauge.add(1, ordering: .relaxed).newValue % 64 == 0 {
                metrics.record(stack)
            }
        }
        rearm()
    }

    /// A WireGuard datagram for `peer`: over DERP, UDP or both, as its path says.
    private func transmit(_ datagram: [UInt8], to peer: WireGuardPublicKey) {
        var route = PeerPath.Route.derp
        let out = withDirect { d, now, random, out in route = d.route(to: peer, now: now, random: &random, into: &out) }
        perform(out)
        switch route {
        case .derp:
            sendDERP(datagram, to: peer)
        case .direct(let endpoint):
            if !sendUDP(datagram, to: endpoint) { sendDERP(datagram, to: peer) }
        case .both(let endpoint):
            _ = sendUDP(datagram, to: endpoint)
            sendDERP(datagram, to: peer)
        }
    }

    private func sendUDP(_ datagram: [UInt8], to endpoint: DiscoEndpoint) -> Bool {
        guard let socket = magic.withLock({ $0 }), socket.send(datagram, to: endpoint) == .sent else { return false }
        metrics.bytesDirectOut.increment(by: Int64(datagram.count))
        return true
    }

    private func sendDERP(_ datagram: [UInt8], to peer: WireGuardPublicKey) {
        metrics.bytesDERPOut.increment(by: Int64(datagram.count))
        guard let client = client(for: peer), let key = X25519PublicKey(peer.bytes) else {
            metrics.noRelay.increment()
            return
        }
        if !client.send(to: key, packet: datagram) { metrics.queueFull.increment() }
    }

    // MARK: Timers

    /// The earliest deadline of WireGuard and the direct-path logic.
    private func nextDeadline() -> WireGuardInstant? {
        DirectTimers.earliest(device.withLock { $0.nextDeadline() }, direct.withLock { $0.nextDeadline })
    }

    private func rearm() {
        let deadline = nextDeadline()?.nanoseconds ?? .max
        if deadline < armed.load(ordering: .relaxed) { timerSignal.notify() }
    }

    private func runTimers() async {
        while !Task.isCancelled {
            let deadline = nextDeadline()
            armed.store(deadline?.nanoseconds ?? .max, ordering: .relaxed)
            if let deadline {
                let delay = Duration.nanoseconds(Int64(clamping: deadline.since(now())))
                await sleep(for: delay, orUntil: { [timerSignal] in await timerSignal.wait() })
            } else {
                await timerSignal.wait()
            }
            guard !Task.isCancelled else { return }
            // On the engine's loop, so what the tick delivers reaches lwIP there directly.
            try? await eventLoop.submit { [self] in
                var sink = EngineSink()
                device.withLock { $0.tick(now: now(), into: &sink) }
                flush(&sink)
                perform(withDirect { d, now, random, out in d.tick(now: now, random: &random, into: &out) })
                refreshSTUNNames()
            }.get()
        }
    }
}

/// Lets a DERP client's packet handler reach the client it belongs to (set once, right
/// after the client is made and before it starts, so every read sees it).
private final class ClientHolder: Sendable {
    private let box = Mutex<DERPClient?>(nil)
    var client: DERPClient? {
        get { box.withLock { $0 } }
        set { box.withLock { $0 = newValue } }
    }
}

/// Collects what one device operation produced, so it is handed on after the lock is released.
struct EngineSink: WireGuardSink {
    var datagrams: [(WireGuardPublicKey, [UInt8])] = []
    var packets: [[UInt8]] = []

    mutating func send(_ datagram: UnsafeRawBufferPointer, to peer: WireGuardPublicKey) {
        datagrams.append((peer, Array(datagram)))
    }

    mutating func deliver(_ packet: UnsafeRawBufferPointer, from peer: WireGuardPublicKey) {
        packets.append(Array(packet))
    }
}
