import AgentProto
import AgentTestSupport
import ControlPlaneDouble
import DERP
import DERPRelayDouble
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Whatever arrives over the relay (garbage, truncated and forged
/// WireGuard messages, packets from keys the agent never heard of, disco garbage, malformed
/// DERP frames) is dropped and counted; the agent stays up, its memory stays bounded, and the
/// local API and the tunnel's status keep answering.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct TailnetHostileTests {
    @Test func garbageOverTheRelayIsDroppedAndCounted() async throws {
        let relay = DERPRelayDouble()
        try await relay.start()
        var manifest = ControlPlaneDouble.defaultManifest
        manifest.agentID = Data((0..<16).map { _ in UInt8.random(in: 0...255) })
        manifest.derpMap = TailnetCoordinatorDouble.loopbackDERPMap(relayPort: relay.port)
        let double = ControlPlaneDouble(manifest: manifest)
        let coordinator = TailnetCoordinatorDouble(derpMap: TailnetCoordinatorDouble.loopbackDERPMap(relayPort: relay.port))
        coordinator.install(on: double)
        let tokenFile = NSTemporaryDirectory() + "agent-token-\(UUID().uuidString)"
        try TestFile.write(tokenFile, (double.token + "\n"), atomically: true)
        defer { unlink(tokenFile) }
        try await double.run { url in
            let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile])
            defer { agent.cleanup() }
            let api = RawHTTPClient(port: try await agent.port())
            #expect(await eventually(timeout: .seconds(60)) { coordinator.agentNode?.preferredDerp == 1 }, "\(agent.log)")
            guard let node = coordinator.agentNode, let agentKey = X25519PublicKey(node.key.dropFirst(2)) else { return }

            // A stranger on the relay (no peer of the agent) sends every kind of bad message.
            let stranger = DERPClient(privateKey: .generate(), node: relay.node(regionID: 1))
            stranger.start()
            // Connected on both sides: the relay lists it, and the client has finished its handshake
            // (it drops what it is given before).
            #expect(
                await eventually(timeout: .seconds(60)) {
                    relay.connectedKeys.contains(stranger.publicKey) && stranger.state.phase == .connected
                })
            let before = rssAnon(agent.pid)
            var generator = SplitMix64(seed: 26)
            var sent = 0
            for round in 0..<2000 {
                let length = Int(generator.next() % 1400) + 1
                var packet = (0..<length).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
                switch round % 5 {
                case 0: packet = [1, 0, 0, 0] + Array(packet.prefix(144))  // an initiation, forged
                case 1: packet = [2, 0, 0, 0] + Array(packet.prefix(88))  // a response to nothing
                case 2: packet = [4, 0, 0, 0] + Array(packet.prefix(200))  // transport, unknown index
                case 3: packet = [0x54, 0x53, 0xF0, 0x9F, 0x92, 0xAC] + packet  // disco magic, garbage box
                default: break  // anything
                }
                if stranger.send(to: agentKey, packet: packet) { sent += 1 }
                // Paced by the stranger's own queue (512 packets), which a loaded host drains slowly.
                if round % 100 == 99 {
                    _ = await eventually(timeout: .seconds(30)) { stranger.statistics.queuedPackets < 64 }
                }
            }
            #expect(sent > 1500)
            // Malformed frames straight from the relay: an unknown type, a short RecvPacket.
            _ = relay.inject([0x7F, 0, 0, 0, 3, 1, 2, 3], to: agentKey)
            _ = relay.inject([0x05, 0, 0, 0, 4, 1, 2, 3, 4], to: agentKey)

            let dropped = await eventually(timeout: .seconds(60)) {
                let text = (try? await api.request("GET", "/metrics").bodyText) ?? ""
                return text.contains("agent_tailnet_dropped_total{reason=\"malformed\"}")
                    && text.contains("agent_tailnet_dropped_total{reason=\"no_session\"}")
            }
            #expect(dropped, "\(agent.log)")
            // Still healthy: the local API, the tunnel's status, one relay connection.
            #expect(try await api.request("GET", "/healthz").status == 200)
            let status = try #require(jsonObject(try await api.request("GET", "/api/v0/tailnet").body))
            #expect(status["home_region"] as? Int == 1 && (status["peers"] as? [Any])?.isEmpty != false, "\(status)")
            #expect(relay.connectedKeys.contains(agentKey))
            // Bounded: 2000 hostile packets do not grow the agent's anonymous memory by more
            // than a few MiB.
            let growth = rssAnon(agent.pid) - before
            #expect(growth < 32 << 20, "anonymous memory grew by \(growth) bytes")
            await stranger.close()
            agent.signal(SIGTERM)
            #expect(await agent.exitStatus() == 0, "\(agent.log)")
        }
        await relay.stop()
    }
}
