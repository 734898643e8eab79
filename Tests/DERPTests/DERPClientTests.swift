import AgentTestSupport
import DERP
import DERPRelayDouble
import Synchronization
import Testing

/// The client against the relay double: the handshake on the wire, packets both ways over
/// each transport, the WebSocket fallback and retries, reconnects.
@Suite(.timeLimit(.minutes(2)))
struct DERPClientTests {
    @Test func handshakeOnTheWire() async throws {
        try await DERPTest.withRelay { relay in
            let client = await DERPTest.client(relay)
            #expect(client.state.phase == .connected)
            #expect(client.state.transport == .upgrade)
            #expect(client.state.serverKey == relay.serverKey.publicKey)
            let recorded = relay.recorded.withLock { $0 }
            #expect(recorded.clientInfos == [ClientInfoRecord(key: client.publicKey, frameLength: 104, json: #"{"version":2,"CanAckPings":true}"#)])
            let request = try #require(recorded.requests.first)
            #expect(request.hasPrefix("GET /derp HTTP/1.1\r\n"))
            #expect(request.contains("\r\nUpgrade: DERP\r\n") && request.contains("\r\nConnection: Upgrade\r\n"))
            #expect(request.contains("\r\nHost: 127.0.0.1:\(relay.port)\r\n"))
            #expect(await eventually { relay.recorded.withLock { $0.notePreferred[client.publicKey] } == true })
            #expect(client.statistics.connects == 1)
            await client.close()
            #expect(client.state.phase == .closed)
            #expect(await eventually { relay.connectedKeys.isEmpty })
        }
    }

    @Test(arguments: [false, true])
    func packetsBothWaysOverUpgrade(tls: Bool) async throws {
        try await DERPTest.withRelay(tls: tls) { relay in
            try await exchange(relay, configuration: DERPTest.fast, expectWebSocket: false)
        }
    }

    @Test func packetsBothWaysOverWebSocket() async throws {
        var configuration = DERPTest.fast
        configuration.forceWebSocket = true
        try await DERPTest.withRelay { relay in
            try await exchange(relay, configuration: configuration, expectWebSocket: true)
            #expect(relay.recorded.withLock { $0.upgradeConnections } == 0)
            let request = try #require(relay.recorded.withLock { $0.requests.first })
            #expect(request.lowercased().contains("sec-websocket-protocol: derp\r\n"))
        }
        try await DERPTest.withRelay(tls: true) { relay in
            try await exchange(relay, configuration: configuration, expectWebSocket: true)
        }
    }

    @Test func upgradeRefusedWith4xxSwitchesToWebSocket() async throws {
        try await DERPTest.withRelay { relay in
            relay.refuseUpgrade.withLock { $0 = true }
            try await exchange(relay, configuration: DERPTest.fast, expectWebSocket: true)
            // One refusal per client; a loaded host can add one (an attempt whose connect
            // timed out before it read the 400 is retried with the upgrade).
            let refusals = relay.recorded.withLock { $0.refusals }
            #expect(refusals.count >= 2 && refusals.allSatisfy { $0 == 400 }, "\(refusals)")
        }
    }

    @Test func upgradeAnswered5xxIsRetried() async throws {
        try await DERPTest.withRelay { relay in
            relay.failNextUpgrades.withLock { $0 = 3 }
            let client = await DERPTest.client(relay)
            #expect(client.state.transport == .upgrade)
            #expect(relay.recorded.withLock { $0.refusals } == [503, 503, 503])
            #expect(relay.recorded.withLock { $0.webSocketConnections } == 0)
            await client.close()
        }
    }

    @Test func relayRestartReconnectsAndTrafficResumes() async throws {
        try await DERPTest.withRelay { relay in
            let inboxA = PacketCollector()
            let inboxB = PacketCollector()
            let a = await DERPTest.client(relay, packetHandler: inboxA.handler)
            let b = await DERPTest.client(relay, packetHandler: inboxB.handler)
            #expect(await DERPTest.deliver([1, 1], from: a, to: b, inbox: inboxB))
            await relay.stop()
            #expect(await eventually { a.state.phase == .connecting && b.state.phase == .connecting })
            #expect(a.send(to: b.publicKey, packet: [9]) == false)
            try await relay.start()
            #expect(await DERPTest.connected(a, relay))
            #expect(await DERPTest.connected(b, relay))
            #expect(await DERPTest.deliver([2, 2], from: a, to: b, inbox: inboxB))
            #expect(await DERPTest.deliver([3, 3], from: b, to: a, inbox: inboxA))
            #expect(a.statistics.reconnects >= 1 && b.statistics.reconnects >= 1)
            #expect(a.statistics.drops["not_connected", default: 0] >= 1)
            await a.close()
            await b.close()
        }
    }

    @Test func eventsReportConnectsAndPeerGone() async throws {
        try await DERPTest.withRelay { relay in
            let inboxB = PacketCollector()
            let a = await DERPTest.client(relay)
            let b = await DERPTest.client(relay, packetHandler: inboxB.handler)
            // b learns a's key by receiving from it; a sent to b, so b is told when a leaves.
            #expect(await DERPTest.deliver([5], from: a, to: b, inbox: inboxB))
            await a.close()
            var iterator = b.events.makeAsyncIterator()
            var seen: [DERPClientEvent] = []
            // Bounded: the events up to the PeerGone (a connect, then the notice).
            for _ in 0..<10 {
                guard let event = await iterator.next() else { break }
                seen.append(event)
                if case .peerGone = event { break }
            }
            #expect(seen.first == .connected(regionID: 1, transport: .upgrade))
            #expect(seen.last == .peerGone(a.publicKey, reason: 0))
            await b.close()
        }
    }

    @Test func aDeadNodeOfTheRegionIsSkipped() async throws {
        try await DERPTest.withRelay { relay in
            var dead = relay.node(name: "dead")
            dead.derpPort = freeLoopbackPort()
            let stunOnly = DERPNode(name: "stun", regionID: 1, hostName: "localhost", ipv4: "127.0.0.1", stunOnly: true)
            let client = DERPClient(
                privateKey: .generate(), nodes: [stunOnly, dead, relay.node()], configuration: DERPTest.fast, logger: DERPTest.quiet)
            #expect(client.nodes.map(\.name) == ["dead", "t2"])
            client.start()
            #expect(await DERPTest.connected(client, relay))
            #expect(client.state.node?.name == "t2")
            await client.close()
            // Both streams end with the client.
            var events = client.events.makeAsyncIterator()
            var count = 0
            // Bounded: what was buffered before the close.
            while await events.next() != nil, count < DERPClient.eventBuffer { count += 1 }
            #expect(count >= 1)
            var packets = client.packets.makeAsyncIterator()
            #expect(await packets.next() == nil)
        }
    }

    @Test func relayAnswersLikeCoderd() async throws {
        try await DERPTest.withRelay { relay in
            // A WebSocket without the `derp` subprotocol is accepted, then closed with 1008.
            let socket = try #require(await LoopbackSocket.connect(port: relay.port))
            socket.send(String.webSocketHandshake("/derp"))
            let (bytes, closed) = await socket.readAll(timeout: .seconds(20))
            #expect(String.httpStatus(of: bytes) == 101)
            let head = try #require(bytes.firstRange(of: Array("\r\n\r\n".utf8))?.upperBound)
            // An unmasked close frame carrying 1008 (policy violation).
            #expect(Array(bytes[head...].prefix(4)) == [0x88, 0x02, 0x03, 0xF0])
            #expect(closed)
            // No upgrade at all: 426.
            let plain = try #require(await LoopbackSocket.connect(port: relay.port))
            plain.send("GET /derp HTTP/1.1\r\nHost: x\r\n\r\n")
            let answer = await plain.readAll(timeout: .seconds(20))
            #expect(String.httpStatus(of: answer.bytes) == 426)
            #expect(String(decoding: answer.bytes, as: UTF8.self).hasSuffix("DERP requires connection upgrade"))
        }
    }

    /// Two clients exchange 20 packets each way (up to 64 KiB), in order.
    private func exchange(_ relay: DERPRelayDouble, configuration: DERPClient.Configuration, expectWebSocket: Bool) async throws {
        let inboxA = PacketCollector()
        let inboxB = PacketCollector()
        let a = await DERPTest.client(relay, configuration: configuration, packetHandler: inboxA.handler)
        let b = await DERPTest.client(relay, configuration: configuration, packetHandler: inboxB.handler)
        #expect(a.state.transport?.isWebSocket == expectWebSocket)
        #expect(b.state.transport?.isWebSocket == expectWebSocket)
        if expectWebSocket, !configuration.forceWebSocket {
            #expect(a.state.transport == .webSocket(reason: #"GET failed with status code 400 (a proxy could be disallowing the use of 'Upgrade: derp'): Invalid "Upgrade" header: DERP"#))
        }
        #expect(await DERPTest.deliver([0xAA], from: a, to: b, inbox: inboxB))
        #expect(await DERPTest.deliver([0xBB], from: b, to: a, inbox: inboxA))
        let sizes = (0..<20).map { [1, 100, 1310, 65536][$0 % 4] }
        var accepted = 0
        for (i, size) in sizes.enumerated() {
            if a.send(to: b.publicKey, packet: [UInt8](repeating: UInt8(i), count: size)) { accepted += 1 }
            if b.send(to: a.publicKey, packet: [UInt8](repeating: UInt8(i), count: size)) { accepted += 1 }
        }
        #expect(accepted == 40)
        #expect(!a.send(to: b.publicKey, packet: [UInt8](repeating: 0, count: 65537)))
        // The warm-up packets ([0xAA], [0xBB]) may have been sent more than once: left out.
        let warmUps: Set<[UInt8]> = [[0xAA], [0xBB]]
        #expect(
            await eventually {
                inboxA.packets.filter { !warmUps.contains($0.packet) }.count >= 20
                    && inboxB.packets.filter { !warmUps.contains($0.packet) }.count >= 20
            })
        let fromA = inboxB.packets.map(\.packet).filter { !warmUps.contains($0) }
        let fromB = inboxA.packets.map(\.packet).filter { !warmUps.contains($0) }
        let expected = sizes.enumerated().map { [UInt8](repeating: UInt8($0.offset), count: $0.element) }
        // Compared outside #expect: it would print every byte of a difference.
        let sameFromA = fromA == expected
        let sameFromB = fromB == expected
        #expect(sameFromA, "packets from a differ: \(fromA.map(\.count)) vs \(sizes)")
        #expect(sameFromB, "packets from b differ: \(fromB.map(\.count)) vs \(sizes)")
        #expect(inboxB.packets.allSatisfy { $0.source == a.publicKey })
        #expect(a.statistics.drops["too_large"] == 1)
        await a.close()
        await b.close()
    }
}
