import AgentProto
import AgentTestSupport
import ControlPlaneDouble
import DERP
import DERPRelayDouble
import Foundation
import Synchronization
import Testing
import WireGuard
#if canImport(Glibc)
import Glibc
#endif

/// DERP over WebSocket (forced by the manifest or
/// by a relay that refuses `Upgrade: DERP`), a relay restart on the same port, and a restart
/// of the upward session (a new Coordinate stream). Same suite, so still serialized.
extension WorkspaceAgentTailnetTests {
    enum WebSocketCause: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// The manifest's `derp_force_websockets`.
        case manifest
        /// The relay answers `Upgrade: DERP` with 400 (coderd's test relay that forces WebSocket).
        case relayRefusesUpgrade
        var testDescription: String { rawValue }
    }

    @Test(arguments: WebSocketCause.allCases)
    func derpOverWebSocketCarriesTheTunnel(_ cause: WebSocketCause) async throws {
        try await Self.withTunnel(configure: { manifest, relay in
            switch cause {
            case .manifest: manifest.derpForceWebsockets = true
            case .relayRefusesUpgrade: relay.refuseUpgrade.withLock { $0 = true }
            }
        }) { tunnel in
            // healthz already answered through the tunnel (withTunnel); the Node says why.
            let node = try #require(tunnel.coordinator.agentNode)
            let reason = node.derpForcedWebsocket[1] ?? ""
            let recorded = tunnel.relay.recorded.withLock { $0 }
            switch cause {
            case .manifest:
                #expect(reason == "forced by configuration", "\(node.derpForcedWebsocket)")
                // The agent chose the WebSocket for the configuration (the reason above); only
                // the bridge, which is not forced, used the Upgrade (more than once when a
                // loaded host made it reconnect).
                #expect(recorded.refusals.isEmpty && recorded.upgradeConnections >= 1, "\(recorded.requests)")
            case .relayRefusesUpgrade:
                #expect(reason.hasPrefix("GET failed with status code 400"), "\(node.derpForcedWebsocket)")
                #expect(recorded.refusals.contains(400) && recorded.upgradeConnections == 0, "\(recorded.requests)")
            }
            #expect(recorded.webSocketConnections >= 1, "\(recorded.requests)")
            #expect(node.preferredDerp == 1)
            // Tunnel traffic beyond healthz: the status route, through the tunnel this time.
            let status = await tunnel.curl([tunnel.url("/api/v0/tailnet")])
            let json = jsonObject(Array(status.stdout.utf8))
            #expect(json?["enabled"] as? Bool == true && jsonInt(json?["home_region"]) == 1, "\(status.stdout)")
        }
    }

    @Test func trafficResumesAfterTheRelayRestartsOnTheSamePort() async throws {
        try await Self.withTunnel { tunnel in
            let relay = tunnel.relay
            let port = relay.port
            let agentKey = try #require(X25519PublicKey(tunnel.agentKey))
            let peerKey = try #require(X25519PublicKey(tunnel.peer.key.publicKey.bytes))
            let node = try #require(tunnel.coordinator.agentNode)

            await relay.stop()
            // No relay, no path (the agent announced no endpoints): the tunnel cannot answer.
            let during = await tunnel.curl([tunnel.url("/healthz")], maxTime: 3)
            #expect(during.status != 0, "healthz with the relay down: \(during.stdout)")

            try await relay.start()
            #expect(relay.port == port)
            // Both the agent and the bridge dial again (their backoff is at most 10 s).
            let back = await eventually(timeout: .seconds(60)) { relay.connectedKeys.isSuperset(of: [agentKey, peerKey]) }
            #expect(back, "connected after the restart: \(relay.connectedKeys)\nagent: \(tunnel.agent.log)")
            let (reached, last) = await tunnel.healthz(timeout: .seconds(90))
            #expect(reached, "curl after the relay restart: \(last)\nagent: \(tunnel.agent.log)")
            // The same node: same key, same home region.
            #expect(tunnel.coordinator.agentNode?.key == node.key && tunnel.coordinator.agentNode?.preferredDerp == 1)
        }
    }

    @Test func aNewCoordinationSessionKeepsTheKeyAndAcksThePeerAgain() async throws {
        try await Self.withTunnel { tunnel in
            let coordinator = tunnel.coordinator
            let (streams, nodes) = coordinator.recorded.withLock { ($0.coordinateStreams, $0.nodes.count) }
            let acks = tunnel.peerAcks
            let key = try #require(coordinator.agentNode?.key)

            // The upward session ends abruptly; the agent reconnects and reopens Coordinate.
            await tunnel.double.dropConnections()
            let reopened = await eventually(timeout: .seconds(60)) { coordinator.recorded.withLock { $0.coordinateStreams } > streams }
            #expect(reopened, "no new Coordinate stream: \(tunnel.agent.log)")
            let resent = await eventually(timeout: .seconds(30)) { coordinator.recorded.withLock { $0.nodes.count } > nodes }
            #expect(resent, "no node on the new stream")
            let again = coordinator.recorded.withLock { Array($0.nodes.dropFirst(nodes)) }
            #expect(!again.isEmpty && again.allSatisfy { $0.key == key }, "the node key changed: \(again.map(\.key))")
            #expect(again.last?.preferredDerp == 1 && again.last?.addresses == tunnel.addresses.prefixes)
            // The new stream starts with the peer's NODE; the agent acks it afresh.
            #expect(await eventually(timeout: .seconds(30)) { tunnel.peerAcks > acks }, "no fresh ack")
            // An abrupt end is no graceful one.
            #expect(coordinator.recorded.withLock { $0.disconnects } == 0)

            let (reached, last) = await tunnel.healthz()
            #expect(reached, "curl after the new session: \(last)\nagent: \(tunnel.agent.log)")
            let tsmp = await tunnel.peer.namespace.run(["python3", "-c", TailnetScripts.tsmpPing(to: tunnel.addresses.primaryText)])
            #expect(tsmp.status == 0 && tsmp.stdout.contains("pong ok"), "TSMP: \(tsmp.stdout)")
        }
    }
}
