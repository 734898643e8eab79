import AgentProto
import ControlPlaneDouble
import FoundationEssentials
import Logging
import Synchronization
import Tailnet
import AgentTestSupport
import Testing

/// The coordination client against the coordinator double, stream to stream in-process (the
/// dRPC transport is tested by the upward seam; here: what is sent and when).
@Suite struct CoordinationClientTests {
    static let agentID: [UInt8] = [
        0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
        0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
    ]
    static let peerID = [UInt8](repeating: 0xc0, count: 16)

    static func peerNode(key: UInt8) -> Coder_Tailnet_V2_Node {
        var node = Coder_Tailnet_V2_Node()
        node.key = Data(Array("np".utf8) + [UInt8](repeating: key, count: 32))
        node.disco = "discokey:" + String(repeating: "0f", count: 32)
        node.preferredDerp = 999
        node.allowedIps = ["fd7a:115c:a1e0::c0/128"]
        node.addresses = node.allowedIps
        return node
    }

    /// One stream: the client's requests go to the double, the double's responses to the client.
    static func stream(_ client: CoordinationClient, _ double: TailnetCoordinatorDouble) -> Task<Void, any Error> {
        Task {
            let (requests, toDouble) = AsyncStream.makeStream(of: [UInt8].self)
            let (responses, toClient) = AsyncStream.makeStream(of: [UInt8].self)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    defer { toClient.finish() }
                    try await double.coordinate(requests: requests) { bytes in toClient.yield(bytes) }
                }
                group.addTask {
                    defer { toDouble.finish() }
                    try await client.run(responses: responses) { bytes in toDouble.yield(bytes) }
                }
                try await group.waitForAll()
            }
        }
    }

    @Test func nodeAfterHomeRegionAcksEveryNodeAndPeersSurviveAStreamEnd() async throws {
        let double = TailnetCoordinatorDouble()
        double.setPeer(id: Self.peerID, node: Self.peerNode(key: 1))
        let announcer = NodeAnnouncer()
        let addresses = try #require(TailnetAddresses(agentID: Self.agentID))
        announcer.set(SelfNode(addresses: addresses, nodeKey: [UInt8](repeating: 9, count: 32), discoKey: [UInt8](repeating: 8, count: 32)))
        let changes = Mutex<[CoordinationState.Change]>([])
        let client = CoordinationClient(
            announcer: announcer, apply: { c in changes.withLock { $0 += c } },
            logger: Logger(label: "test"))
        let first = Self.stream(client, double)
        // The peer known before the stream arrives at once and is acked; no node yet (no home).
        #expect(await eventually { double.recorded.withLock { $0.acks.count } == 1 })
        #expect(double.recorded.withLock { $0.nodes.isEmpty })
        #expect(changes.withLock { $0.count } == 1)
        announcer.update { $0.preferredDERP = 999 }
        #expect(await eventually { double.recorded.withLock { $0.nodes.count } == 1 })
        let node = try #require(double.agentNode)
        #expect(node.preferredDerp == 999 && node.addresses == addresses.prefixes && Array(node.key.dropFirst(2)) == [UInt8](repeating: 9, count: 32))
        // A repeat of the same node is acked again; a new key replaces the peer.
        double.setPeer(id: Self.peerID, node: Self.peerNode(key: 1))
        double.setPeer(id: Self.peerID, node: Self.peerNode(key: 2))
        #expect(await eventually { double.recorded.withLock { $0.acks.count } == 3 })
        #expect(double.recorded.withLock { $0.acks }.allSatisfy { $0 == Self.peerID })
        // An unchanged node is not resent; a change is.
        announcer.update { $0.preferredDERP = 999 }
        announcer.update { $0.forcedWebSocket = [999: "forced"] }
        #expect(await eventually { double.recorded.withLock { $0.nodes.count } == 2 })
        #expect(double.agentNode?.derpForcedWebsocket == [999: "forced"])
        // The server ends the stream: the peer is kept, lost.
        double.endStreams()
        try await first.value
        #expect(client.peers.first?.value.lost == true)
        // A new stream: the same node again, fresh NODE, fresh ack, the peer no longer lost.
        let second = Self.stream(client, double)
        #expect(await eventually { double.recorded.withLock { r in r.nodes.count == 3 && r.acks.count == 4 } })
        #expect(double.recorded.withLock { $0.nodes[2].key == $0.nodes[0].key })
        #expect(await eventually { client.peers.first?.value.lost == false })
        // Graceful end: disconnect, then the server closes; DISCONNECTED removes peers.
        #expect(client.disconnect())
        await client.waitForStreamEnd(within: .seconds(30))
        try await second.value
        #expect(double.recorded.withLock { $0.disconnects } == 1)
        #expect(!client.disconnect())
        #expect(client.snapshot.streams == 2)
    }

    @Test func disconnectedPeersAreRemovedAndErrorsCounted() async throws {
        let double = TailnetCoordinatorDouble()
        let announcer = NodeAnnouncer()
        let removed = Mutex(0)
        let client = CoordinationClient(
            announcer: announcer,
            apply: { changes in
                removed.withLock { $0 += changes.filter { if case .remove = $0 { true } else { false } }.count }
            }, logger: Logger(label: "test"))
        let running = Self.stream(client, double)
        double.setPeer(id: Self.peerID, node: Self.peerNode(key: 1))
        #expect(await eventually { client.peers.count == 1 })
        double.setPeer(id: Self.peerID, node: nil)
        // The peers change first, then what applies the change: both waited for.
        #expect(await eventually { client.peers.isEmpty && removed.withLock { $0 } == 1 })
        #expect(removed.withLock { $0 } == 1)
        var failure = Coder_Tailnet_V2_CoordinateResponse()
        failure.error = "ready for handshake error: peer not found"
        double.send(failure)
        #expect(await eventually { client.snapshot.errors == 1 })
        double.endStreams()
        try await running.value
    }
}
