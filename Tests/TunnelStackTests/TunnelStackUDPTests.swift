import AgentTestSupport
import NIOCore
import Testing
@testable import TunnelStack

/// UDP through the stack: hand-built datagrams fed with `input`, relayed to real UDP sockets
/// on 127.0.0.1, the answers caught in `output`.
@Suite(.serialized)
struct TunnelStackUDPTests {
    let peer = TunnelAddress("fd7a:115c:a1e0::77")!

    func makeStack(
        _ index: UInt8, configuration: TunnelStackConfiguration = TunnelStackConfiguration(), sent: PacketLog
    )
        async throws -> TunnelStack
    {
        try await TunnelStack.start(
            addresses: stackAddresses(index), configuration: configuration, eventLoop: lwIPTestLoop,
            output: { packet in sent.append(Array(packet)) })
    }

    /// Checks that `packet` is a whole IPv6/UDP packet from `local`:`sourcePort` to the peer's
    /// `destinationPort` with a correct checksum, and returns its payload.
    func reply(_ packet: [UInt8], from local: TunnelAddress, _ sourcePort: UInt16, to destinationPort: UInt16) -> [UInt8]? {
        guard let fields = PacketBuilder.udpFields(of: packet) else {
            Issue.record("not a UDP packet")
            return nil
        }
        #expect(packet[0] >> 4 == 6 && Int(packet[4]) << 8 | Int(packet[5]) == packet.count - 40)
        #expect(Array(packet[8..<24]) == local.bytes && Array(packet[24..<40]) == peer.bytes)
        #expect(fields.sourcePort == sourcePort && fields.destinationPort == destinationPort)
        #expect(fields.length == packet.count - 40)
        #expect(fields.checksum != 0 && TunnelPacket.transportChecksum(packet) == 0)
        return fields.payload
    }

    @Test func parsesDatagramsAndBuildsCheckedOnes() throws {
        let local = stackAddresses(0x40)[0]
        let packet = PacketBuilder.udp(from: peer, 40000, to: local, 53, payload: Array("query".utf8))
        let parsed = try #require(packet.withUnsafeBytes { TunnelPacket.parse($0) })
        guard case .udp(let datagram) = parsed.transport else {
            Issue.record("not UDP: \(parsed.transport)")
            return
        }
        #expect(datagram.sourcePort == 40000 && datagram.destinationPort == 53 && Array(packet[datagram.payload]) == Array("query".utf8))
        // Built by the stack: the checksum holds; an empty payload too.
        let built = Array("answer".utf8).withUnsafeBytes { TunnelPacket.udp(from: local, 53, to: peer, 40000, payload: $0) }
        #expect(TunnelPacket.transportChecksum(built) == 0 && built.count == 40 + 8 + 6)
        #expect(built.withUnsafeBytes { TunnelPacket.parse($0) }?.transport != .malformedUDP)
        let empty = [UInt8]().withUnsafeBytes { TunnelPacket.udp(from: local, 53, to: peer, 40000, payload: $0) }
        #expect(TunnelPacket.transportChecksum(empty) == 0)
        for bad in malformed(to: local) {
            #expect(bad.withUnsafeBytes { TunnelPacket.parse($0) }?.transport == .malformedUDP)
        }
    }

    /// UDP packets the stack must refuse: length field beyond the packet, below the header,
    /// a header cut short, a wrong checksum, no checksum.
    func malformed(to local: TunnelAddress) -> [[UInt8]] {
        let good = PacketBuilder.udp(from: peer, 40001, to: local, 7000, payload: Array("payload".utf8))
        var long = good
        long[45] += 1
        var short = good
        (short[44], short[45]) = (0, 7)
        let truncated = PacketBuilder.ipv6(from: peer, to: local, nextHeader: 17, payload: [0x9C, 0x41, 0x1B, 0x58])
        var wrong = good
        wrong[48] ^= 0x01
        var none = good
        (none[46], none[47]) = (0, 0)
        return [long, short, truncated, wrong, none]
    }

    @Test func echoesThroughALoopbackServer() async throws {
        let server = try await UDPEchoServer.start()
        let sent = PacketLog()
        let stack = try await makeStack(0x41, sent: sent)
        let local = stack.addresses[1]
        let sourcePort = try #require(freeUDPPort())
        let serverPort = UInt16(server.port)
        await stack.feed(PacketBuilder.udp(from: peer, sourcePort, to: local, serverPort, payload: Array("hello".utf8)))
        #expect(await eventually(timeout: .seconds(20)) { sent.count == 1 })
        let first = try #require(sent.first)
        #expect(reply(first, from: local, serverPort, to: sourcePort) == Array("hello".utf8))
        // The local socket is bound to the peer's port (free here).
        #expect(server.senderPorts == [Int(sourcePort)])
        sent.clear()
        // The largest payload a 1280-byte packet carries, on the same flow.
        let large = pattern(1232, step: 7, offset: 3)
        await stack.feed(PacketBuilder.udp(from: peer, sourcePort, to: local, serverPort, payload: large))
        #expect(await eventually(timeout: .seconds(20)) { sent.count == 1 })
        let second = try #require(sent.first)
        #expect(second.count == 1280)
        #expect(reply(second, from: local, serverPort, to: sourcePort) == large)
        let counters = await stack.countersOnLoop()
        #expect(counters.udpFlowsOpen == 1 && counters.udpFlowsOpened == 1)
        #expect(counters.udpDatagramsIn == 2 && counters.udpDatagramsOut == 2 && counters.udpDatagramsDropped == 0)
        await stack.shutdown()
        #expect(stack.counters().udpFlowsOpen == 0)
        await server.stop()
    }

    @Test func eachSourcePortGetsItsOwnSocketAndATakenPortAnother() async throws {
        let server = try await UDPEchoServer.start()
        let sent = PacketLog()
        let stack = try await makeStack(0x42, sent: sent)
        let local = stack.addresses[0]
        let serverPort = UInt16(server.port)
        let free = try #require(freeUDPPort())
        let taken = try #require(UDPPortHolder())
        defer { taken.close() }
        await stack.feed(PacketBuilder.udp(from: peer, free, to: local, serverPort, payload: [1]))
        #expect(await eventually(timeout: .seconds(20)) { sent.count == 1 })
        // The peer's port is held by another socket here: the flow binds one of the kernel's.
        await stack.feed(PacketBuilder.udp(from: peer, taken.port, to: local, serverPort, payload: [2]))
        #expect(await eventually(timeout: .seconds(20)) { sent.count == 2 })
        let ports = server.senderPorts
        #expect(ports.count == 2 && ports[0] == Int(free) && ports[1] != Int(taken.port) && ports[1] != ports[0])
        // Each answer goes back to its own peer port.
        #expect(sent.udpDestinationPorts == [free, taken.port])
        #expect(await stack.countersOnLoop().udpFlowsOpen == 2)
        await stack.shutdown()
        await server.stop()
    }

    @Test func flowBoundDropsNewFlowsAndCountsThem() async throws {
        let server = try await UDPEchoServer.start()
        let sent = PacketLog()
        var configuration = TunnelStackConfiguration()
        configuration.maxUDPFlows = 2
        let stack = try await makeStack(0x43, configuration: configuration, sent: sent)
        let local = stack.addresses[0]
        let serverPort = UInt16(server.port)
        for port in UInt16(45000)..<45003 {
            await stack.feed(PacketBuilder.udp(from: peer, port, to: local, serverPort, payload: [UInt8(port & 0xFF)]))
        }
        #expect(await eventually(timeout: .seconds(20)) { sent.count == 2 })
        var counters = await stack.countersOnLoop()
        #expect(counters.udpFlowsOpen == 2 && counters.udpFlowsRefused == 1 && counters.udpFlowsOpened == 2)
        // An open flow still carries datagrams.
        await stack.feed(PacketBuilder.udp(from: peer, 45000, to: local, serverPort, payload: [9]))
        #expect(await eventually(timeout: .seconds(20)) { sent.count == 3 })
        counters = await stack.countersOnLoop()
        #expect(counters.udpFlowsRefused == 1 && counters.udpDatagramsIn == 3 && counters.udpDatagramsOut == 3)
        #expect(sent.udpDestinationPorts == [45000, 45001])
        await stack.shutdown()
        await server.stop()
    }

    @Test func answersTooLargeForTheMTUAreDropped() async throws {
        // The request's first byte says how long the answer is: 0 → 1232, 1 → 1233, 2 → 4000.
        let server = try await UDPEchoServer.start { request in
            [UInt8](repeating: 0xA5, count: [1232, 1233, 4000][Int(request.first ?? 0) % 3])
        }
        let sent = PacketLog()
        let stack = try await makeStack(0x49, sent: sent)
        let local = stack.addresses[0]
        let serverPort = UInt16(server.port)
        for size in [UInt8(1), 2, 0] {
            await stack.feed(PacketBuilder.udp(from: peer, 49000, to: local, serverPort, payload: [size]))
        }
        // Only the last fits a 1280-byte packet: it alone comes back (the others were read
        // before it on the same socket, in order).
        #expect(await eventually(timeout: .seconds(20)) { sent.count == 1 })
        #expect(await eventually(timeout: .seconds(20)) { stack.counters().udpDatagramsDropped == 2 })
        let answer = try #require(sent.first)
        #expect(answer.count == 1280 && reply(answer, from: local, serverPort, to: 49000) == [UInt8](repeating: 0xA5, count: 1232))
        let counters = await stack.countersOnLoop()
        #expect(counters.udpFlowsOpen == 1 && counters.udpDatagramsOut == 1)
        await stack.shutdown()
        await server.stop()
    }

    @Test func idleFlowsEndByTheInjectedClock() async throws {
        let server = try await UDPEchoServer.start()
        let sent = PacketLog()
        let clock = ManualClock()
        var configuration = TunnelStackConfiguration()
        configuration.clock = { clock.now() }
        let stack = try await makeStack(0x44, configuration: configuration, sent: sent)
        let local = stack.addresses[0]
        let serverPort = UInt16(server.port)
        await stack.feed(PacketBuilder.udp(from: peer, 46000, to: local, serverPort, payload: [1]))
        #expect(await eventually(timeout: .seconds(20)) { sent.count == 1 })
        // 100 s later: still open; a datagram (and its answer) restarts the 2 minutes.
        clock.advance(by: .seconds(100))
        await stack.expireIdleUDPFlows()
        #expect(await stack.countersOnLoop().udpFlowsOpen == 1)
        await stack.feed(PacketBuilder.udp(from: peer, 46000, to: local, serverPort, payload: [2]))
        #expect(await eventually(timeout: .seconds(20)) { sent.count == 2 })
        clock.advance(by: .seconds(119))
        await stack.expireIdleUDPFlows()
        #expect(await stack.countersOnLoop().udpFlowsOpen == 1)
        clock.advance(by: .seconds(2))
        await stack.expireIdleUDPFlows()
        let counters = await stack.countersOnLoop()
        #expect(counters.udpFlowsOpen == 0 && counters.udpIdleTimeouts == 1)
        // The next datagram opens a new flow.
        await stack.feed(PacketBuilder.udp(from: peer, 46000, to: local, serverPort, payload: [3]))
        #expect(await eventually(timeout: .seconds(20)) { sent.count == 3 })
        #expect(await stack.countersOnLoop().udpFlowsOpened == 2)
        // DNS flows get 30 s, the rest 2 min.
        #expect(TunnelUDPFlow.idleTimeout(port: 53, configuration: TunnelStackConfiguration()) == .seconds(30))
        #expect(TunnelUDPFlow.idleTimeout(port: 5353, configuration: TunnelStackConfiguration()) == .minutes(2))
        await stack.shutdown()
        await server.stop()
    }

    @Test func idleTimerEndsAFlowByItself() async throws {
        // A bound socket that never answers: nothing but the stack's own timer can end the
        // flow, and no answer can race the 200 ms (an echo a loaded host delays past it
        // would be dropped with the flow).
        let silent = try #require(UDPPortHolder())
        defer { silent.close() }
        let sent = PacketLog()
        var configuration = TunnelStackConfiguration()
        configuration.udpIdleTimeout = .milliseconds(200)
        let stack = try await makeStack(0x45, configuration: configuration, sent: sent)
        await stack.feed(PacketBuilder.udp(from: peer, 47000, to: stack.addresses[0], silent.port, payload: [1]))
        #expect(await eventually(timeout: .seconds(20)) { stack.counters().udpFlowsOpened == 1 })
        #expect(await eventually(timeout: .seconds(20)) { stack.counters().udpIdleTimeouts == 1 })
        let counters = await stack.countersOnLoop()
        #expect(counters.udpFlowsOpen == 0 && counters.udpFlowsOpened == 1)
        #expect(sent.count == 0)
        await stack.shutdown()
    }

    @Test func aPortWithNothingListeningEndsTheFlow() async throws {
        let sent = PacketLog()
        let stack = try await makeStack(0x46, sent: sent)
        let local = stack.addresses[0]
        let port = try #require(freeUDPPort())
        await stack.feed(PacketBuilder.udp(from: peer, 48000, to: local, port, payload: Array("anyone?".utf8)))
        // The kernel's port-unreachable fails the connected socket: the flow ends.
        #expect(await eventually(timeout: .seconds(20)) { stack.counters().udpFlowsOpened == 1 && stack.counters().udpFlowsOpen == 0 })
        #expect(sent.count == 0)
        // The stack goes on answering.
        await stack.feed(PacketBuilder.echoRequest(from: peer, to: local, identifier: 7, data: []))
        #expect(sent.count == 1)
        await stack.shutdown()
    }

    @Test func malformedDatagramsAreDroppedAndCounted() async throws {
        let sent = PacketLog()
        var configuration = TunnelStackConfiguration()
        let stack = try await makeStack(0x47, configuration: configuration, sent: sent)
        let local = stack.addresses[0]
        let before = await stack.countersOnLoop()
        var bad = malformed(to: local)
        // Port 0 is no destination.
        bad.append(PacketBuilder.udp(from: peer, 40002, to: local, 0, payload: [1]))
        for packet in bad { await stack.feed(packet) }
        let after = await stack.countersOnLoop()
        #expect(after.udpDatagramsDropped == before.udpDatagramsDropped + UInt64(bad.count))
        #expect(after.packetsDropped == before.packetsDropped + UInt64(bad.count))
        #expect(after.udpFlowsOpened == 0 && sent.count == 0)
        await stack.shutdown()
        // Forwarding off: UDP is dropped too.
        configuration.forwardToLoopback = false
        let closed = try await makeStack(0x48, configuration: configuration, sent: sent)
        await closed.feed(PacketBuilder.udp(from: peer, 40003, to: closed.addresses[0], 7000, payload: [1]))
        let counters = await closed.countersOnLoop()
        #expect(counters.udpDatagramsDropped == 1 && counters.udpFlowsOpened == 0)
        await closed.shutdown()
    }
}

extension PacketLog {
    /// The UDP destination ports of the packets sent.
    var udpDestinationPorts: Set<UInt16> {
        Set(all.compactMap { PacketBuilder.udpFields(of: $0)?.destinationPort })
    }
}
