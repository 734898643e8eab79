import AgentSystem
import Logging
import NIOCore
import NIOPosix
import OutboundProxy
import Synchronization

/// The agent's connection to a DERP relay: dials one of a region's
/// nodes, keeps the connection alive and reconnects, sends packets to peers by node key
/// and delivers what peers send.
///
/// - Transport: `Upgrade: DERP`, or a WebSocket when ``Configuration/forceWebSocket`` is
///   set or after the Upgrade got HTTP 4xx (or TLS negotiated h2); a 5xx is retried on the
///   same transport. The choice sticks for the client's life and is reported in
///   ``DERPClientState/transport`` and ``DERPClientEvent/connected(regionID:transport:)``.
/// - Reconnects: as ``DERPRedialPolicy`` decides (a backoff from ``Configuration/backoffFloor``
///   to ``Configuration/backoffCeiling``, reset by a connection that stayed up
///   ``Configuration/healthyAfter``; a Restarting frame's reconnect-in and try-for window).
///   Failed dials move to the next node of the list.
/// - Bounds: outbound frames not yet written are capped at ``Configuration/maxQueuedPackets``
///   and ``Configuration/maxQueuedBytes`` (more are dropped, `queue_full`); inbound packets
///   wait in ``packets`` up to ``Configuration/inboundBuffer`` (more are dropped,
///   `inbound_full`); events keep the newest ``eventBuffer``.
/// - Loss: a packet sent or relayed in the instant of a reconnect may be lost (the old
///   connection's queue is dropped, `closed`; the relay drops packets for keys not
///   connected). Nothing may depend on the first packet after a (re)connect: WireGuard
///   retransmits its handshake.
public final class DERPClient: Sendable {
    /// Timeouts, bounds and policy.
    public struct Configuration: Sendable {
        /// DNS, TCP, TLS, HTTP and the DERP handshake must finish within this.
        public var connectTimeout: Duration = .seconds(10)
        /// No frame for this long: the connection is dead (the relay sends a KeepAlive
        /// every 60–65 s).
        public var readTimeout: Duration = .seconds(120)
        /// Outbound frames accepted but not yet written to the socket.
        public var maxQueuedPackets = 512
        /// Their bytes (1 MiB: about 800 full-size WireGuard packets).
        public var maxQueuedBytes = 1 << 20
        /// Received packets waiting in ``DERPClient/packets``.
        public var inboundBuffer = 1024
        /// Use the WebSocket transport from the start (the manifest's `derp_force_websockets`).
        public var forceWebSocket = false
        /// This is our home region: send NotePreferred(01) after connecting.
        public var isHome = true
        /// The first redial waits up to this; repeated failures double it.
        public var backoffFloor: Duration = .milliseconds(100)
        /// The longest wait between failed dials.
        public var backoffCeiling: Duration = .seconds(10)
        /// A connection that lasted this long resets the backoff.
        public var healthyAfter: Duration = .seconds(5)
        /// The longest wait a Restarting frame can impose, and the longest try-for window
        /// it can open (redials every `backoffFloor` within it).
        public var maxRestartWait: Duration = .seconds(60)
        /// The proxy settings: a relay is reached through `HTTPS_PROXY`'s `CONNECT` unless
        /// `NO_PROXY` exempts its host (the agent's environment by default).
        public var proxies: ProxyEnvironment = .process

        /// The shipped values (the Go client's timeouts).
        public init() {}
    }

    /// Events kept for a slow reader (the newest win).
    public static let eventBuffer = 256

    /// Our node key's public half: our identity on the relay.
    public let publicKey: X25519PublicKey
    /// The region's nodes, tried in order.
    public let nodes: [DERPNode]
    /// What the client was made with.
    public let configuration: Configuration
    /// Packets from peers, in arrival order (finished at once when a packet handler was
    /// given, and when the client closes).
    public let packets: AsyncStream<DERPReceivedPacket>
    /// Connects, disconnects and relay notices, in order (finished when the client closes).
    public let events: AsyncStream<DERPClientEvent>

    private let privateKey: X25519PrivateKey
    private let packetHandler: (@Sendable (DERPReceivedPacket) -> Void)?
    private let packetSink: AsyncStream<DERPReceivedPacket>.Continuation
    private let eventSink: AsyncStream<DERPClientEvent>.Continuation
    private let counters = DERPCounters()
    private let logger: Logger
    private let group: any EventLoopGroup
    private let shared = Mutex(Shared())

    private struct Shared {
        var state = DERPClientState()
        var current: DERPConnection?
        var task: Task<Void, Never>?
        var closed = false
    }

    /// - Parameters:
    ///   - privateKey: our node key (the WireGuard static key).
    ///   - nodes: the home region's DERP nodes (STUN-only ones are skipped); at least one.
    ///   - packetHandler: when given, packets are handed to it on the connection's event
    ///     loop (it must not block) instead of ``packets``.
    public init(
        privateKey: X25519PrivateKey, nodes: [DERPNode], configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "derp"), group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        packetHandler: (@Sendable (DERPReceivedPacket) -> Void)? = nil
    ) {
        precondition(nodes.contains { !$0.stunOnly }, "a DERP client needs a node that is not STUN-only")
        self.privateKey = privateKey
        self.publicKey = privateKey.publicKey
        self.nodes = nodes.filter { !$0.stunOnly }
        self.configuration = configuration
        self.logger = logger
        self.group = group
        self.packetHandler = packetHandler
        let packetStream = AsyncStream.makeStream(of: DERPReceivedPacket.self, bufferingPolicy: .bufferingOldest(configuration.inboundBuffer))
        packets = packetStream.stream
        packetSink = packetStream.continuation
        let eventStream = AsyncStream.makeStream(of: DERPClientEvent.self, bufferingPolicy: .bufferingNewest(Self.eventBuffer))
        events = eventStream.stream
        eventSink = eventStream.continuation
        if packetHandler != nil { packetSink.finish() }
    }

    /// A client of one node.
    public convenience init(
        privateKey: X25519PrivateKey, node: DERPNode, configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "derp"), group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        packetHandler: (@Sendable (DERPReceivedPacket) -> Void)? = nil
    ) {
        self.init(privateKey: privateKey, nodes: [node], configuration: configuration, logger: logger, group: group, packetHandler: packetHandler)
    }

    /// Starts connecting (once; later calls do nothing). Runs until ``close()``.
    public func start() {
        shared.withLock { s in
            guard s.task == nil, !s.closed else { return }
            s.state.phase = .connecting
            s.task = Task { await self.run() }
        }
    }

    /// Stops reconnecting, closes the connection and finishes both streams; returns once
    /// the connection loop has ended.
    public func close() async {
        let (task, connection) = shared.withLock { s -> (Task<Void, Never>?, DERPConnection?) in
            s.closed = true
            s.state.phase = .closed
            return (s.task, s.current)
        }
        task?.cancel()
        connection?.close()
        await task?.value
        packetSink.finish()
        eventSink.finish()
    }

    /// Queues `packet` (at most 64 KiB) for the peer with node key `peer`; never blocks.
    /// False, and the drop counted, when not connected, too large, or the queue is full.
    @discardableResult
    public func send(to peer: X25519PublicKey, packet: some Collection<UInt8>) -> Bool {
        guard packet.count <= DERPProtocol.maxPacketLength else {
            counters.dropped("too_large")
            return false
        }
        guard let connection = shared.withLock({ $0.current }) else {
            counters.dropped("not_connected")
            return false
        }
        return connection.sendPacket(to: peer, packet: packet)
    }

    /// What the client is doing now.
    public var state: DERPClientState { shared.withLock { $0.state } }

    /// Counts since the client was made.
    public var statistics: DERPClientStatistics { counters.snapshot }

    // MARK: The connection loop

    private func run() async {
        var redial = DERPRedialPolicy(configuration)
        var nodeIndex = 0
        var webSocketReason: String? = configuration.forceWebSocket ? "forced by configuration" : nil
        // Bounded in count by the redial policy (each turn waits for a connection's life or a
        // delay) and in time by close(), which cancels this task.
        while !Task.isCancelled {
            let node = nodes[nodeIndex % nodes.count]
            let transport: DERPTransport = webSocketReason.map { .webSocket(reason: $0) } ?? .upgrade
            shared.withLock {
                $0.state.phase = $0.closed ? .closed : .connecting
                $0.state.node = node
            }
            let delay: Duration
            do throws(DERPConnectError) {
                let connection = try await DERPConnector.connect(parameters(node: node, transport: transport), group: group)
                guard adopt(connection) else {
                    connection.close()
                    return
                }
                let started = ContinuousClock.now
                let end = try? await connection.ended.get()
                let reason = shared.withLock { s -> String in
                    if s.current === connection { s.current = nil }
                    // Our own close() ended it: not the relay's doing.
                    let reason = s.closed ? "closed" : end?.error ?? "closed"
                    if !s.closed { s.state.phase = .connecting }
                    s.state.lastError = reason
                    return reason
                }
                logger.info("DERP connection ended", metadata: ["region": "\(node.regionID)", "reason": "\(reason)"])
                eventSink.yield(.disconnected(reason: reason))
                let restarting = end?.restarting.map {
                    (reconnectIn: Duration.milliseconds(Int64($0.reconnectIn)), tryFor: Duration.milliseconds(Int64($0.tryFor)))
                }
                let now = ContinuousClock.now
                delay = redial.ended(lived: now - started, restarting: restarting, now: now)
            } catch {
                shared.withLock { $0.state.lastError = error.description }
                logger.info("DERP connect failed", metadata: ["region": "\(node.regionID)", "transport": "\(transport)", "error": "\(error)"])
                if error.switchesToWebSocket, webSocketReason == nil {
                    webSocketReason = error.description
                    continue
                }
                if case .refused = error {} else { nodeIndex += 1 }
                delay = redial.dialFailed(now: .now)
            }
            try? await Task.sleep(for: delay)
        }
    }

    private func parameters(node: DERPNode, transport: DERPTransport) -> DERPConnector.Parameters {
        DERPConnector.Parameters(
            node: node, transport: transport, privateKey: privateKey, isHome: configuration.isHome,
            connectTimeout: TimeAmount(configuration.connectTimeout), readTimeout: TimeAmount(configuration.readTimeout),
            maxQueuedPackets: configuration.maxQueuedPackets, maxQueuedBytes: configuration.maxQueuedBytes,
            counters: counters, delegate: self, proxies: configuration.proxies)
    }

    /// Makes `connection` the current one; false when the client closed meanwhile.
    private func adopt(_ connection: DERPConnection) -> Bool {
        let adopted = shared.withLock { s -> Bool in
            guard !s.closed else { return false }
            s.current = connection
            s.state.phase = .connected
            s.state.node = connection.node
            s.state.transport = connection.transport
            s.state.serverKey = connection.serverKey
            return true
        }
        guard adopted else { return false }
        counters.connected()
        logger.info("DERP connected", metadata: ["region": "\(connection.node.regionID)", "transport": "\(connection.transport)"])
        eventSink.yield(.connected(regionID: connection.node.regionID, transport: connection.transport))
        return true
    }
}

extension DERPClient: DERPConnectionDelegate {
    func received(_ packet: DERPReceivedPacket) {
        if let packetHandler {
            packetHandler(packet)
            return
        }
        if case .dropped = packetSink.yield(packet) { counters.dropped("inbound_full") }
    }

    func peerGone(_ key: X25519PublicKey, reason: UInt8) {
        eventSink.yield(.peerGone(key, reason: reason))
    }

    func health(_ text: String) {
        let value: String? = text.isEmpty ? nil : text
        shared.withLock { $0.state.health = value }
        eventSink.yield(.health(value))
    }

    func restarting(reconnectIn: UInt32, tryFor: UInt32) {
        eventSink.yield(.restarting(reconnectIn: .milliseconds(Int64(reconnectIn)), tryFor: .milliseconds(Int64(tryFor))))
    }
}
