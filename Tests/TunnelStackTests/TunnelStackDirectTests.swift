import AgentTestSupport
import CLwIPGlue
import NIOCore
import Synchronization
import Testing
@testable import TunnelStack

/// The stack (real lwIP) driven with hand-built packets, its output captured: no kernel.
@Suite(.serialized)
struct TunnelStackDirectTests {
    let peer = TunnelAddress("fd7a:115c:a1e0::77")!

    /// A stack whose packets land in `sent`.
    func makeStack(
        _ index: UInt8, configuration: TunnelStackConfiguration = TunnelStackConfiguration(), sent: PacketLog,
        acceptors: [UInt16: TunnelAcceptor] = [4: TunnelAcceptor { $0.eventLoop.makeSucceededVoidFuture() }]
    ) async throws -> TunnelStack {
        try await TunnelStack.start(
            addresses: stackAddresses(index), configuration: configuration, eventLoop: lwIPTestLoop,
            output: { packet in sent.append(Array(packet)) }, acceptors: acceptors)
    }

    @Test func aFlowCrossesToItsCFormAndBackUnchanged() {
        let flow = TunnelFlow(remote: peer, remotePort: 40_000, local: TunnelAddress("fd7a:115c:a1e0:ab12:4843:cd96:6258:b240")!, localPort: 22)
        var c = flow.cFlow
        // The C form holds the bytes in network order, as the addresses' own bytes are.
        #expect(withUnsafeBytes(of: &c.remote) { Array($0) } == peer.bytes)
        #expect(withUnsafeBytes(of: &c.local) { Array($0) } == flow.local.bytes)
        #expect(TunnelFlow(c) == flow)
    }

    @Test func parsesSegmentsAndBuildsCheckedResets() throws {
        let local = stackAddresses(1)[0]
        let syn = PacketBuilder.tcp(from: peer, 40000, to: local, 4, sequence: 1000, flags: 0x02, options: [2, 4, 0x04, 0xC4])
        let packet = try #require(syn.withUnsafeBytes { TunnelPacket.parse($0) })
        guard case .tcp(let segment) = packet.transport else {
            Issue.record("not TCP")
            return
        }
        #expect(segment.sourcePort == 40000 && segment.destinationPort == 4 && segment.sequence == 1000 && segment.syn)
        #expect(segment.optionsValid && segment.sequenceLength == 1)
        // A truncated option (kind 2 without room for its length) is refused.
        let bad = PacketBuilder.tcp(from: peer, 40000, to: local, 4, sequence: 1, flags: 0x02, options: [1, 1, 1, 2])
        guard case .tcp(let badSegment) = bad.withUnsafeBytes({ TunnelPacket.parse($0) })?.transport else {
            Issue.record("not TCP")
            return
        }
        #expect(!badSegment.optionsValid)
        let reset = TunnelPacket.reset(refusing: segment, from: local, to: peer)
        #expect(TunnelPacket.transportChecksum(reset) == 0)
        #expect(reset[53] == 0x14)
        #expect(Array(reset[48..<52]) == [0, 0, 0x03, 0xE9])  // ACK = 1001
        // Not IPv6, or shorter than its header says: nil.
        #expect([UInt8](repeating: 0x45, count: 60).withUnsafeBytes { TunnelPacket.parse($0) } == nil)
        #expect(Array(syn.dropLast(1)).withUnsafeBytes { TunnelPacket.parse($0) } == nil)
    }

    @Test func answersSynWithTheTunnelMSSAndResetsReservedPorts() async throws {
        let sent = PacketLog()
        let stack = try await makeStack(2, sent: sent)
        let local = stack.addresses[0]
        // MSS 1460 offered: the SYN-ACK must still say 1220 (MTU 1280 - 60).
        await stack.feed(PacketBuilder.tcp(from: peer, 40001, to: local, 4, sequence: 5000, flags: 0x02, options: [2, 4, 0x05, 0xB4]))
        let synAck = try #require(sent.first)
        #expect(synAck[53] == 0x12)  // SYN|ACK
        #expect(Array(synAck[8..<24]) == local.bytes && Array(synAck[24..<40]) == peer.bytes)
        #expect(PacketBuilder.mss(of: synAck) == 1220)
        #expect(TunnelPacket.transportChecksum(synAck) == 0)
        #expect(await stack.countersOnLoop().halfOpenConnections == 1)
        sent.clear()
        // Reserved port 5: RST|ACK acknowledging the SYN (beside, on a slow host, lwIP's
        // resent SYN-ACK to 40001).
        await stack.feed(PacketBuilder.tcp(from: peer, 40002, to: local, 5, sequence: 7000, flags: 0x02))
        let reset = try #require(sent.all.first { UInt16($0[42]) << 8 | UInt16($0[43]) == 40002 })
        #expect(reset[53] == 0x14)
        #expect(Array(reset[48..<52]) == [0, 0, 0x1B, 0x59])  // 7001
        #expect(await stack.countersOnLoop().refusedReservedPort == 1)
        await stack.shutdown()
    }

    @Test func answersEchoAndDropsWhatIsNotForIt() async throws {
        let sent = PacketLog()
        let stack = try await makeStack(3, sent: sent)
        let local = stack.addresses[1]
        await stack.feed(PacketBuilder.echoRequest(from: peer, to: local, identifier: 0x4242, data: Array("ping".utf8)))
        let reply = try #require(sent.first)
        #expect(reply[6] == 58 && reply[40] == 129)
        #expect(Array(reply[8..<24]) == local.bytes && Array(reply.suffix(4)) == Array("ping".utf8))
        sent.clear()
        let before = await stack.countersOnLoop().packetsDropped
        // IPv4, another destination, UDP, a router advertisement: all dropped, nothing sent.
        await stack.feed([0x45] + [UInt8](repeating: 0, count: 59))
        await stack.feed(PacketBuilder.echoRequest(from: peer, to: TunnelAddress("fd7a:115c:a1e0::99")!, identifier: 1, data: []))
        await stack.feed(PacketBuilder.ipv6(from: peer, to: local, nextHeader: 17, payload: [UInt8](repeating: 0, count: 12)))
        await stack.feed(PacketBuilder.ipv6(from: peer, to: local, nextHeader: 58, payload: [134, 0, 0, 0] + [UInt8](repeating: 0, count: 12)))
        #expect(await stack.countersOnLoop().packetsDropped == before + 4)
        #expect(sent.count == 0)
        await stack.shutdown()
        // After shutdown the stack drops everything.
        await stack.feed(PacketBuilder.echoRequest(from: peer, to: local, identifier: 2, data: []))
        #expect(sent.count == 0)
    }

    @Test func halfOpenBoundDropsFurtherSyns() async throws {
        let sent = PacketLog()
        var configuration = TunnelStackConfiguration()
        configuration.maxHalfOpen = 4
        let stack = try await makeStack(4, configuration: configuration, sent: sent)
        let local = stack.addresses[0]
        for port in UInt16(41000)..<41010 {
            await stack.feed(PacketBuilder.tcp(from: peer, port, to: local, 4, sequence: UInt32(port) * 1000, flags: 0x02))
        }
        let counters = await stack.countersOnLoop()
        #expect(counters.halfOpenConnections == 4)
        #expect(counters.droppedHalfOpenLimit == 6)
        // One SYN-ACK to each admitted port (lwIP may have resent some if the host was slow).
        #expect(sent.destinationPorts == [41000, 41001, 41002, 41003])
        // A peer reset frees its slot.
        await stack.feed(PacketBuilder.tcp(from: peer, 41000, to: local, 4, sequence: 41000 * 1000 + 1, flags: 0x04))
        #expect(await stack.countersOnLoop().halfOpenConnections == 3)
        await stack.shutdown()
    }

    @Test func connectionBoundResetsFurtherSyns() async throws {
        let sent = PacketLog()
        var configuration = TunnelStackConfiguration()
        configuration.maxConnections = 2
        let stack = try await makeStack(9, configuration: configuration, sent: sent)
        let local = stack.addresses[0]
        for port in UInt16(44000)..<44003 {
            await stack.feed(PacketBuilder.tcp(from: peer, port, to: local, 4, sequence: 1, flags: 0x02))
        }
        // A SYN-ACK to each of the first two ports (lwIP may have resent one if the host was
        // slow), a reset to the third.
        let answers = sent.all.map { (port: UInt16($0[42]) << 8 | UInt16($0[43]), flags: $0[53]) }
        #expect(Set(answers.filter { $0.flags == 0x12 }.map(\.port)) == [44000, 44001])
        #expect(answers.filter { $0.flags & 0x04 != 0 }.map(\.port) == [44002])
        #expect(answers.allSatisfy { $0.flags == 0x12 || $0.port == 44002 })
        let counters = await stack.countersOnLoop()
        #expect(counters.halfOpenConnections == 2 && counters.refusedConnectionLimit == 1)
        // A retransmitted SYN of a handshake in progress is answered again, not counted anew.
        await stack.feed(PacketBuilder.tcp(from: peer, 44000, to: local, 4, sequence: 1, flags: 0x02))
        let limited = await stack.countersOnLoop()
        #expect(limited.refusedConnectionLimit == 1 && limited.halfOpenConnections == 2)
        await stack.shutdown()
    }

    @Test func forwardAnswersTheSynOnlyAfterTheLocalConnectAndTimesOutHandshakes() async throws {
        let sent = PacketLog()
        var configuration = TunnelStackConfiguration()
        // Long enough that a loaded host sees the half-open state before it expires.
        configuration.handshakeTimeout = .seconds(2)
        let stack = try await makeStack(7, configuration: configuration, sent: sent)
        let local = stack.addresses[0]
        let accepted = TestFlag()
        let server = try #require(
            LocalServer { connection in
                accepted.set()
                _ = readAll(connection, limit: 1)  // until the stack closes it
            })
        await stack.feed(PacketBuilder.tcp(from: peer, 43000, to: local, UInt16(server.port), sequence: 9000, flags: 0x02))
        // Nothing is answered before the local connect; then the SYN-ACK.
        let answered = await eventually(timeout: .seconds(20)) { sent.count >= 1 }
        #expect(answered)
        await accepted.wait(upTo: .seconds(20))
        #expect(accepted.isSet)
        let synAck = try #require(sent.first)
        #expect(synAck[53] == 0x12 && PacketBuilder.mss(of: synAck) == 1220)
        // Half-open until the timeout (which a stalled host may already have reached).
        let now = await stack.countersOnLoop()
        #expect(now.halfOpenConnections == 1 || now.handshakeTimeouts == 1)
        // The peer never completes the handshake: the stack gives up and closes the local side.
        let expired = await eventually(timeout: .seconds(20)) { stack.counters().handshakeTimeouts == 1 }
        #expect(expired)
        #expect(await stack.countersOnLoop().halfOpenConnections == 0)
        await server.finished.wait(upTo: .seconds(20))
        #expect(server.finished.isSet)
        server.stop()
        await stack.shutdown()
    }

    @Test func forwardToNothingIsReset() async throws {
        let sent = PacketLog()
        let stack = try await makeStack(8, sent: sent)
        let port = UInt16(freeLoopbackPort())
        await stack.feed(PacketBuilder.tcp(from: peer, 43001, to: stack.addresses[1], port, sequence: 100, flags: 0x02))
        let reset = await eventually(timeout: .seconds(20)) { sent.count == 1 }
        #expect(reset)
        let packet = try #require(sent.first)
        #expect(packet[53] == 0x14 && Array(packet[48..<52]) == [0, 0, 0, 101])
        let refused = await stack.countersOnLoop()
        #expect(refused.refusedNoListener == 1 && refused.halfOpenConnections == 0)
        await stack.shutdown()
    }

    @Test func twoStacksLiveInOneProcess() async throws {
        let sentA = PacketLog()
        let sentB = PacketLog()
        let a = try await makeStack(5, sent: sentA)
        let b = try await makeStack(6, sent: sentB)
        await a.feed(PacketBuilder.echoRequest(from: peer, to: a.addresses[0], identifier: 1, data: []))
        await b.feed(PacketBuilder.echoRequest(from: peer, to: b.addresses[0], identifier: 2, data: []))
        // Each answers its own, through its own output.
        #expect(sentA.count == 1 && sentB.count == 1)
        await b.feed(PacketBuilder.echoRequest(from: peer, to: a.addresses[0], identifier: 3, data: []))
        #expect(sentA.count == 1 && sentB.count == 1)
        await a.shutdown()
        await b.feed(PacketBuilder.tcp(from: peer, 42000, to: b.addresses[0], 4, sequence: 1, flags: 0x02))
        #expect(sentB.count == 2)
        await b.shutdown()
    }
}

/// The packets a stack sent.
final class PacketLog: Sendable {
    private let packets = Mutex<[[UInt8]]>([])

    func append(_ packet: [UInt8]) { packets.withLock { $0.append(packet) } }
    func clear() { packets.withLock { $0 = [] } }
    var count: Int { packets.withLock { $0.count } }
    var first: [UInt8]? { packets.withLock { $0.first } }
    var all: [[UInt8]] { packets.withLock { $0 } }
    /// The first packet sent that `matches`, once there is one (or nil after a generous bound).
    func first(where matches: ([UInt8]) -> Bool) async -> [UInt8]? {
        _ = await eventually(timeout: .seconds(20)) { all.contains(where: matches) }
        return all.first(where: matches)
    }
    /// The TCP destination ports of the IPv6 packets sent (40-byte header, no extensions).
    var destinationPorts: Set<UInt16> {
        packets.withLock { packets in
            Set(packets.compactMap { $0.count >= 44 && $0[6] == 6 ? UInt16($0[42]) << 8 | UInt16($0[43]) : nil })
        }
    }
}

extension TunnelStack {
    /// Feeds `packet` on the stack's loop and returns once lwIP has handled it (and sent
    /// whatever it answers).
    func feed(_ packet: [UInt8]) async {
        try? await eventLoop.submit { self.input(packet) }.get()
    }

    /// The counters read on the stack's loop (the half-open count is exact there).
    func countersOnLoop() async -> TunnelStackCounters {
        (try? await eventLoop.submit { self.counters() }.get()) ?? counters()
    }
}
