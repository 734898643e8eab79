import AgentCore
import AgentHTTP
import CoreMetrics
import DERP
import Hummingbird
import Logging
import TunnelStack
import WireGuard

/// The tailnet as a capability module, mounted at `/api/v0/tailnet`: coordination and the
/// DERP map on every upward session, the relay connections, WireGuard and the tunnel's
/// TCP/IPv6 stack, through which coderd reaches the HTTP API on port 4 and forwarded ports.
/// Off when standalone or with `--tailnet=false`; its status route answers either way.
public struct TailnetModule: HTTPModule {
    let runtime: TailnetRuntime?

    public var name: String { "tailnet" }

    /// - Parameters:
    ///   - accessURL: the control plane URL (`--agent-url`); nil when standalone (the module
    ///     then does nothing).
    ///   - ports: what other modules serve on the tunnel's own ports (SSH on 1 and 22).
    public init(
        configuration: TailnetOptions.Configuration, accessURL: String?, context: AgentContext,
        ports: TunnelPortServices = TunnelPortServices(), logger: Logger
    ) {
        guard configuration.enabled, let accessURL else {
            runtime = nil
            return
        }
        let runtime = TailnetRuntime(
            accessURL: AccessURL(accessURL), listenPort: configuration.listenPort, manifest: context.manifest,
            acceptor: context.connections, ports: ports, traffic: context.tunnelTraffic, logger: logger)
        // A scrape sees what the stack counted up to that moment.
        context.metricsRefresh.register { _ = runtime.current?.recordStackMetrics() }
        self.runtime = runtime
    }

    public var upwardParticipants: [any UpwardParticipant] {
        guard let runtime else { return [] }
        return [TailnetParticipant(runtime: runtime)]
    }

    /// The graceful end of coordination (peers hear DISCONNECTED, not LOST): `disconnect{}` is
    /// queued at `announce` (which returns at once) and the server's close awaited at `work`,
    /// at most 3 s; at `serving`, relay connections and the tunnel stack close with the other
    /// listeners.
    public var services: [ModuleService] {
        guard let runtime else { return [] }
        return [
            .onShutdown("tailnet disconnect", in: .announce) { runtime.beginDisconnect() },
            // The reference waits up to its 5 s hard deadline. At 1 s, two agents on a loaded
            // host ended without the coordinator double ever reading their disconnect.
            .onShutdown("tailnet disconnected", in: .work) { await runtime.finishDisconnect(within: .seconds(3)) },
            .onShutdown("tailnet", in: .serving) { await runtime.stop() },
        ]
    }

    /// The status, on the pool: it reads the engine's relay and peer tables under their
    /// locks, which the engine's thread holds while it works.
    public func routes(_ routes: inout AgentRoutes) {
        let runtime = self.runtime
        routes.get { _, _ in JSONResponse.make(Self.status(runtime)) }
    }

    static func status(_ runtime: TailnetRuntime?) -> TailnetStatus {
        guard let runtime else { return TailnetStatus(enabled: false) }
        var status = TailnetStatus(enabled: true, started: runtime.current != nil)
        status.nodeKey = "nodekey:" + SelfNode.hex(runtime.nodeKey.publicKey.bytes)
        status.discoKey = SelfNode.discoText(runtime.discoKey.publicKey.bytes)
        guard let engine = runtime.current else { return status }
        status.addresses = engine.addresses.prefixes
        status.homeRegion = engine.homeRegion == 0 ? nil : engine.homeRegion
        let statistics = engine.relayStatistics
        status.relays = engine.relayStates.sorted { $0.key < $1.key }.map { region, state in
            TailnetStatus.Relay(
                region: region, state: "\(state.phase)", transport: state.transport.map { "\($0)" }, lastError: state.lastError,
                connects: statistics[region]?.connects ?? 0, reconnects: statistics[region]?.reconnects ?? 0)
        }
        let coordinated = runtime.coordination.peers
        let now = engine.instant
        let direct = engine.directStatus()
        status.directBlocked = direct.blocked
        var ports: [String: UInt16] = [:]
        if let v4 = direct.v4Port { ports["v4"] = v4 }
        if let v6 = direct.v6Port { ports["v6"] = v6 }
        status.udpPorts = ports
        status.endpoints = direct.endpoints
        status.peers = engine.peerStatus().map { key, peer in
            let node = coordinated.values.first { $0.node.nodeKey == key.bytes }
            let path = direct.peers[key]
            return TailnetStatus.Peer(
                nodeKey: "nodekey:" + SelfNode.hex(key.bytes), homeRegion: node?.node.homeRegion, lost: node?.lost,
                lastHandshakeSecondsAgo: peer.lastHandshake.map { Double(now.since($0)) / 1e9 },
                receivedBytes: peer.receivedBytes, sentBytes: peer.sentBytes,
                path: path?.path ?? "derp", directTrusted: path.map(\.trusted), lastPongMilliseconds: path?.latencyMilliseconds,
                candidates: path?.candidates)
        }.sorted { $0.nodeKey < $1.nodeKey }
        let stack = engine.recordStackMetrics()
        status.tunnelConnections = stack?.openConnections
        status.udpFlows = stack?.udpFlowsOpen
        return status
    }
}
