import AgentCore
import AgentProto
import DERP
import Logging
import Synchronization
import SwiftProtobuf
import TunnelStack
import WireGuard

/// What the tailnet keeps for the agent's whole life: its keys (made once: a node key that is
/// also the WireGuard static key and the DERP identity, and a disco key), the node announced,
/// the DERP map, the coordination's peer table, and the engine (made on the first manifest
/// that carries an agent id).
final class TailnetRuntime: Sendable {
    let nodeKey = WireGuardPrivateKey.generate()
    let discoKey = X25519PrivateKey.generate()
    let announcer = NodeAnnouncer()
    let metrics = TailnetMetrics()
    /// The `/debug/magicsock/debug-logging/{state}` switch, shown on the page.
    let debugLogging = Mutex(false)
    let follower: DERPMapFollower
    let coordination: CoordinationClient
    private let manifest: any ManifestSource
    private let acceptor: any ConnectionAcceptor
    let logger: Logger

    /// Where the engine counts the tunnel's flows (read by the stats report).
    let traffic: TunnelTraffic
    /// Services of other modules on the tunnel's own ports.
    let ports: TunnelPortServices

    /// `--tailnet-listen-port`.
    let listenPort: UInt16

    init(
        accessURL: AccessURL?, listenPort: UInt16 = 0, manifest: any ManifestSource, acceptor: any ConnectionAcceptor,
        ports: TunnelPortServices = TunnelPortServices(), traffic: TunnelTraffic = TunnelTraffic(), logger: Logger
    ) {
        self.traffic = traffic
        self.listenPort = listenPort
        self.manifest = manifest
        self.acceptor = acceptor
        self.ports = ports
        self.logger = logger
        let holder = EngineHolder()
        self.follower = DERPMapFollower(accessURL: accessURL, logger: logger) { map in holder.engine?.apply(map: map) }
        self.coordination = CoordinationClient(
            announcer: announcer, apply: { changes in holder.engine?.apply(changes) },
            sinceHandshake: { key in holder.engine?.sinceHandshake(key) }, logger: logger)
        self.holder = holder
    }

    private let holder: EngineHolder
    /// The missing agent id is logged once, not on every session.
    private let warnedAboutID = Atomic<Bool>(false)

    /// The engine, once running.
    var current: TailnetEngine? { holder.engine }

    /// The engine for the current manifest, made and started on first use; nil (logged) when
    /// the manifest has no usable agent id.
    func engineForCurrentManifest() throws -> TailnetEngine? {
        guard let manifest = manifest.currentManifest else { return nil }
        let tailnet = manifest.tailnet
        if let running = holder.engine {
            running.setBlockEndpoints(tailnet.disableDirectConnections)
            applyManifestMap(tailnet.derpMap)
            return running
        }
        guard let addresses = TailnetAddresses(agentID: tailnet.agentID) else {
            if !warnedAboutID.exchange(true, ordering: .relaxed) {
                logger.warning(
                    "the manifest has no agent id (16 bytes): the tailnet does not start",
                    metadata: ["bytes": "\(tailnet.agentID.count)"])
            }
            return nil
        }
        let engine = TailnetEngine(
            addresses: addresses, nodeKey: nodeKey, discoKey: discoKey, forceWebSocket: tailnet.derpForceWebSockets,
            listenPort: listenPort, blockEndpoints: tailnet.disableDirectConnections, announcer: announcer, metrics: metrics, traffic: traffic, logger: logger)
        // The node first: the engine's start begins the UDP bind and DERP, whose endpoint list
        // and home region are changes to it (``NodeAnnouncer/update(_:)`` drops a change made
        // before there is a node, and a later `set` would replace it).
        announcer.set(SelfNode(addresses: addresses, nodeKey: nodeKey.publicKey.bytes, discoKey: discoKey.publicKey.bytes))
        try engine.start(acceptor: acceptor, ports: ports)
        holder.engine = engine
        applyManifestMap(tailnet.derpMap)
        logger.info("tailnet started", metadata: ["address": "\(TailnetAddresses.text(addresses.primary))"])
        return engine
    }

    private func applyManifestMap(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        do {
            follower.apply(try Coder_Tailnet_V2_DERPMap(serializedBytes: bytes))
        } catch {
            logger.warning("the manifest's DERP map does not decode", metadata: ["error": "\(error)"])
        }
    }

    /// The graceful end of coordination, first half: `disconnect{}` is queued (never waits).
    func beginDisconnect() {
        coordination.disconnect()
    }

    /// The second half: up to `limit` for the server to close the stream.
    func finishDisconnect(within limit: Duration) async {
        await coordination.waitForStreamEnd(within: limit)
    }

    func stop() async {
        await holder.engine?.stop()
    }
}

/// The engine, set once when it starts; read by callbacks made before it existed.
final class EngineHolder: Sendable {
    private let box = Mutex<TailnetEngine?>(nil)
    var engine: TailnetEngine? {
        get { box.withLock { $0 } }
        set { box.withLock { $0 = newValue } }
    }
}
