import AgentTestSupport
import DERP
import DERPRelayDouble
import Synchronization
import Testing

/// A relay that misbehaves: bad greetings and frames end the connection with a clear
/// error and the client reconnects; server notices are honoured; memory stays bounded.
@Suite(.timeLimit(.minutes(2)))
struct DERPHostileTests {
    @Test(arguments: [
        ("short ServerKey", DERPRawFrame(type: 1, payload: DERPProtocol.magic + [UInt8](repeating: 1, count: 31)).encoded),
        ("wrong magic", DERPRawFrame(type: 1, payload: Array("DERPKEY!".utf8) + [UInt8](repeating: 1, count: 32)).encoded),
        ("not a ServerKey", DERPFrame.keepAlive.encoded),
        ("greeting over 1 KiB", DERPRawFrame(type: 1, payload: DERPProtocol.magic + [UInt8](repeating: 1, count: 1100)).encoded),
    ])
    func badGreetingIsAnErrorThenReconnects(name: String, greeting: [UInt8]) async throws {
        try await DERPTest.withRelay { relay in
            relay.greeting.withLock { $0 = greeting }
            let client = DERPClient(privateKey: .generate(), node: relay.node(), configuration: DERPTest.fast, logger: DERPTest.quiet)
            client.start()
            #expect(await eventually { client.state.lastError == "invalid server greeting" }, "\(name): \(client.state.lastError ?? "")")
            #expect(client.state.phase == .connecting)
            relay.greeting.withLock { $0 = nil }
            #expect(await DERPTest.connected(client, relay))
            await client.close()
        }
    }

    @Test func malformedFramesAfterTheHandshake() async throws {
        try await DERPTest.withRelay { relay in
            let client = await DERPTest.client(relay)
            // Unknown types and frames too short for their type are skipped and counted.
            relay.inject(DERPRawFrame(type: 0x7e, payload: [1, 2, 3]).encoded, to: client.publicKey)
            relay.inject(DERPRawFrame(type: DERPFrameType.recvPacket, payload: [1, 2]).encoded, to: client.publicKey)
            #expect(
                await eventually {
                    client.statistics.drops["unknown_frame"] == 1 && client.statistics.drops["malformed_frame"] == 1
                })
            #expect(client.state.phase == .connected && client.statistics.connects == 1)

            // A header over 1 MiB: dropped as soon as the header is read.
            relay.inject([0x05, 0x00, 0x20, 0x00, 0x00], to: client.publicKey)
            #expect(await eventually { client.state.lastError?.contains("over the 1048576-byte limit") == true })
            #expect(await eventually { client.statistics.connects == 2 && client.state.phase == .connected })

            // A frame cut off by the end of the stream.
            #expect(await DERPTest.connected(client, relay))
            relay.inject([0x05, 0x00, 0x00, 0x00, 0x40] + [UInt8](repeating: 7, count: 10), to: client.publicKey)
            try await Task.sleep(for: .milliseconds(50))
            relay.disconnect(client.publicKey)
            #expect(await eventually { client.state.lastError?.contains("ended inside a frame") == true })
            #expect(await eventually { client.statistics.connects == 3 && client.state.phase == .connected })
            await client.close()
        }
    }

    @Test func pingIsAnsweredAndNoticesAreHonoured() async throws {
        try await DERPTest.withRelay { relay in
            let client = await DERPTest.client(relay)
            let data: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
            relay.send(.ping(data), to: client.publicKey)
            #expect(await eventually { relay.recorded.withLock { $0.pongs } == [data] })

            relay.send(.keepAlive, to: client.publicKey)
            relay.send(.health("duplicate connection"), to: client.publicKey)
            #expect(await eventually { client.state.health == "duplicate connection" })
            relay.send(.health(""), to: client.publicKey)
            #expect(await eventually { client.state.health == nil })
            #expect(client.statistics.connects == 1)

            relay.send(.restarting(reconnectInMilliseconds: 100, tryForMilliseconds: 2000), to: client.publicKey)
            try await Task.sleep(for: .milliseconds(50))
            relay.disconnect(client.publicKey)
            #expect(await eventually { client.statistics.connects == 2 && client.state.phase == .connected })
            var iterator = client.events.makeAsyncIterator()
            var restarting = false
            // Bounded: the events so far (connect, health twice, restarting, disconnect, connect).
            for _ in 0..<6 {
                guard let event = await iterator.next() else { break }
                if event == .restarting(reconnectIn: .milliseconds(100), tryFor: .milliseconds(2000)) {
                    restarting = true
                    break
                }
            }
            #expect(restarting)
            await client.close()
        }
    }

    @Test func silenceBeyondTheReadTimeoutReconnects() async throws {
        try await DERPTest.withRelay { relay in
            var configuration = DERPTest.fast
            // Long enough for a handshake on a loaded host; the relay then says nothing.
            configuration.readTimeout = .seconds(2)
            let client = DERPClient(privateKey: .generate(), node: relay.node(), configuration: configuration, logger: DERPTest.quiet)
            client.start()
            #expect(await eventually(timeout: .seconds(90)) { client.statistics.connects >= 2 })
            #expect(await eventually { client.state.lastError?.hasPrefix("no DERP frame") == true })
            await client.close()
        }
    }

    @Test func webSocketMessageBoundariesMeanNothing() async throws {
        var configuration = DERPTest.fast
        configuration.forceWebSocket = true
        try await DERPTest.withRelay { relay in
            let inbox = PacketCollector()
            let client = await DERPTest.client(relay, configuration: configuration, packetHandler: inbox.handler)
            let source = X25519PrivateKey.generate().publicKey
            let one = DERPFrame.recvPacket(source: source, packet: [1, 1, 1]).encoded
            let two = DERPFrame.recvPacket(source: source, packet: [2, 2]).encoded
            let three = DERPFrame.recvPacket(source: source, packet: [3]).encoded
            // One frame over two messages, then the end of one and two more in one message.
            relay.inject(Array(one.prefix(3)), to: client.publicKey)
            relay.inject(Array(one.dropFirst(3)) + two + three, to: client.publicKey)
            #expect(await eventually { inbox.packets.map(\.packet) == [[1, 1, 1], [2, 2], [3]] })
            #expect(client.state.phase == .connected && client.statistics.connects == 1)
            await client.close()
        }
    }

    @Test func aRelayThatNeverReadsDoesNotGrowTheQueue() async throws {
        try await DERPTest.withRelay { relay in
            var configuration = DERPTest.fast
            configuration.maxQueuedBytes = 256 << 10
            let a = await DERPTest.client(relay, configuration: configuration)
            let b = await DERPTest.client(relay)
            #expect(relay.setReading(false, from: a.publicKey))
            let packet = [UInt8](repeating: 0x42, count: 32 << 10)
            var accepted = 0
            // Bounded: 2,000 sends (64 MiB offered), far beyond the kernel's buffers.
            for i in 0..<2000 {
                if a.send(to: b.publicKey, packet: packet) { accepted += 1 }
                if i % 32 == 0 { try await Task.sleep(for: .milliseconds(1)) }
            }
            let statistics = a.statistics
            #expect(statistics.drops["queue_full", default: 0] > 0)
            #expect(statistics.peakQueuedBytes <= 256 << 10)
            #expect(statistics.queuedBytes <= 256 << 10)
            #expect(accepted < 2000)
            relay.setReading(true, from: a.publicKey)
            #expect(await eventually { a.statistics.queuedPackets == 0 })
            await a.close()
            await b.close()
        }
    }

    @Test func aReceiverThatNeverReadsDropsBeyondItsBuffer() async throws {
        try await DERPTest.withRelay { relay in
            var configuration = DERPTest.fast
            configuration.inboundBuffer = 16
            let a = await DERPTest.client(relay)
            let b = await DERPTest.client(relay, configuration: configuration)
            // b's packets stream is never read.
            for i in 0..<200 { a.send(to: b.publicKey, packet: [UInt8(i & 0xff)]) }
            #expect(await eventually { b.statistics.drops["inbound_full", default: 0] >= 200 - 16 - 1 })
            await a.close()
            await b.close()
        }
    }

    @Test func discoPingOverTheRelayGetsAPong() async throws {
        try await DERPTest.withRelay { relay in
            let inboxA = PacketCollector()
            let agentDisco = X25519PrivateKey.generate()
            let agent = await DERPTest.client(relay)
            let answering = Task {
                // Bounded by the stream: it finishes when the agent's client closes. A Ping is
                // answered over the relay as the agent does (`Disco.pong`, region 1).
                for await packet in agent.packets {
                    if let received = try? Disco.open(packet.packet, privateKey: agentDisco),
                        let pong = Disco.pong(answering: received, privateKey: agentDisco, regionID: 1)
                    {
                        agent.send(to: packet.source, packet: pong)
                    }
                }
            }
            let peerDisco = X25519PrivateKey.generate()
            let peer = await DERPTest.client(relay, packetHandler: inboxA.handler)
            let txID: [UInt8] = Array(20..<32)
            let ping = try #require(Disco.seal(.ping(txID: txID, nodeKey: peer.publicKey), privateKey: peerDisco, to: agentDisco.publicKey))
            let pongArrived = await eventually(timeout: .seconds(20)) {
                peer.send(to: agent.publicKey, packet: ping)
                return await eventually(timeout: .milliseconds(200)) { !inboxA.packets.isEmpty }
            }
            #expect(pongArrived)
            let reply = try #require(inboxA.packets.first)
            #expect(reply.source == agent.publicKey)
            let opened = try Disco.open(reply.packet, privateKey: peerDisco)
            #expect(opened.sender == agentDisco.publicKey)
            #expect(opened.message == .pong(txID: txID, address: DiscoEndpoint.ipv4Mapped(127, 3, 3, 40, port: 1).address, port: 1))
            await agent.close()
            await answering.value
            await peer.close()
        }
    }
}
