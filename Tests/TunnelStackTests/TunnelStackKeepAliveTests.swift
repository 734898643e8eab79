import AgentTestSupport
import Foundation
import Glibc
import NIOCore
import Synchronization
import Testing

@testable import TunnelStack

/// TCP keepalive on tunnel connections, as the Go agent's netstack: an idle forwarded
/// connection whose peer answers the probes stays open however long it is idle; one whose
/// peer went away is reset both ways after the unanswered probes. Hand-built packets against
/// real lwIP and a real local service, on a short keepalive.
struct TunnelStackKeepAliveTests {
    let peer = TunnelAddress("fd7a:115c:a1e0::7a")!
    let peerPort: UInt16 = 46000

    @Test func anIdlePeerThatAnswersProbesStaysAndOneThatStopsIsResetBothWays() async throws {
        let localEnded = TestFlag()
        let server = try #require(
            LocalServer { connection in
                // Nothing either way; the read ends when the stack resets the connection.
                _ = readAll(connection, limit: 1)
                localEnded.set()
            })
        var configuration = TunnelStackConfiguration()
        configuration.keepAliveIdle = .seconds(1)
        configuration.keepAliveInterval = .milliseconds(500)
        configuration.keepAliveProbes = 2
        let sent = PacketLog()
        let local = stackAddresses(0x55)[0]
        let port = UInt16(server.port)
        let peer = self.peer
        let peerPort = self.peerPort
        @Sendable func segment(sequence: UInt32, acknowledgment: UInt32 = 0, flags: UInt8) -> [UInt8] {
            PacketBuilder.tcp(
                from: peer, peerPort, to: local, port, sequence: sequence, acknowledgment: acknowledgment, flags: flags,
                options: flags == 0x02 ? [2, 4, 0x04, 0xC4] : [])
        }
        // While `answering`, each probe (an ACK alone, one below what the stack sent next) is
        // answered as soon as it goes out, on the stack's next loop turn.
        let answering = Atomic<Bool>(true)
        let answered = Atomic<Int>(0)
        let running = Mutex<(stack: TunnelStack, next: UInt32)?>(nil)
        let stack = try await TunnelStack.start(
            addresses: stackAddresses(0x55), configuration: configuration, eventLoop: lwIPTestLoop,
            output: { packet in
                let bytes = Array(packet)
                sent.append(bytes)
                guard answering.load(ordering: .acquiring), bytes.count == 60, bytes[53] & 0x17 == 0x10,
                    let (stack, next) = running.withLock({ $0 }), Segment.sequence(bytes) &+ 1 == next
                else { return }
                let answer = segment(sequence: Segment.acknowledgment(bytes), acknowledgment: Segment.sequence(bytes) &+ 1, flags: 0x10)
                answered.add(1, ordering: .relaxed)
                stack.eventLoop.execute { stack.input(answer) }
            }, acceptors: [:])

        await stack.feed(segment(sequence: 1000, flags: 0x02))
        let synAck = try #require(await sent.first { $0[53] == 0x12 })
        let next = Segment.sequence(synAck) &+ 1
        await stack.feed(segment(sequence: 1001, acknowledgment: next, flags: 0x10))
        let opened = await eventually(timeout: .seconds(20)) { await stack.countersOnLoop().openConnections == 1 }
        #expect(opened)

        // Three probes answered: more than the idle time and every probe together, and the
        // connection is still open.
        running.withLock { $0 = (stack, next) }
        let three = await eventually(timeout: .seconds(60)) { answered.load(ordering: .relaxed) >= 3 }
        #expect(three)
        answering.store(false, ordering: .releasing)
        #expect(await stack.countersOnLoop().openConnections == 1)
        #expect(!sent.all.contains { $0[53] & 0x04 != 0 })
        #expect(!localEnded.isSet)

        // Unanswered: a reset to the peer, and the local side ends.
        let reset = await sent.first { $0[53] & 0x04 != 0 }
        #expect(reset != nil)
        let ended = await eventually(timeout: .seconds(20)) { await stack.countersOnLoop().openConnections == 0 }
        #expect(ended)
        await localEnded.wait(upTo: .seconds(20))
        #expect(localEnded.isSet)
        server.stop()
        await stack.shutdown()
    }

    @Test func aServedConnectionWhosePeerStopsAnsweringFailsWithATimeout() async throws {
        var configuration = TunnelStackConfiguration()
        configuration.keepAliveIdle = .seconds(1)
        configuration.keepAliveInterval = .milliseconds(500)
        configuration.keepAliveProbes = 2
        let recorder = ErrorRecorder()
        let acceptor = TunnelAcceptor { channel in
            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(recorder) }
        }
        let sent = PacketLog()
        let stack = try await TunnelStack.start(
            addresses: stackAddresses(0x56), configuration: configuration, eventLoop: lwIPTestLoop,
            output: { packet in sent.append(Array(packet)) }, acceptors: [4: acceptor])
        let local = stack.addresses[0]
        await stack.feed(PacketBuilder.tcp(from: peer, peerPort, to: local, 4, sequence: 1000, flags: 0x02, options: [2, 4, 0x04, 0xC4]))
        let synAck = try #require(sent.all.last)
        #expect(synAck[53] == 0x12)
        await stack.feed(
            PacketBuilder.tcp(from: peer, peerPort, to: local, 4, sequence: 1001, acknowledgment: Segment.sequence(synAck) &+ 1, flags: 0x10))
        // No probe is answered: the peer gets a reset, the pipeline a timeout.
        #expect(await sent.first { $0[53] & 0x04 != 0 } != nil)
        let failed = await eventually(timeout: .seconds(20)) { !recorder.errnos.withLock { $0 }.isEmpty }
        #expect(failed)
        #expect(recorder.errnos.withLock { $0 } == [ETIMEDOUT])
        await stack.shutdown()
    }
}

extension TunnelStackKeepAliveTests {
    @Test func theSSHPortsWaitLongerBeforeTheFirstProbe() async throws {
        var configuration = TunnelStackConfiguration()
        configuration.keepAliveIdle = .seconds(1)
        configuration.keepAliveInterval = .milliseconds(500)
        configuration.keepAliveProbes = 2
        #expect(configuration.keepAliveIdleByPort[22] == .hours(72) && configuration.keepAliveIdleByPort[1] == .hours(72))
        let acceptor = TunnelAcceptor { channel in channel.eventLoop.makeSucceededVoidFuture() }
        let sent = PacketLog()
        let stack = try await TunnelStack.start(
            addresses: stackAddresses(0x57), configuration: configuration, eventLoop: lwIPTestLoop,
            output: { packet in sent.append(Array(packet)) }, acceptors: [4: acceptor, 22: acceptor])
        let local = stack.addresses[0]
        func toPeer(from port: UInt16) -> ([UInt8]) -> Bool { { UInt16($0[40]) << 8 | UInt16($0[41]) == port } }
        // Nothing is cleared from here on: on a loaded host port 4's probes and reset can come
        // before port 22's handshake is done.
        for port: UInt16 in [4, 22] {
            await stack.feed(PacketBuilder.tcp(from: peer, peerPort, to: local, port, sequence: 1000, flags: 0x02, options: [2, 4, 0x04, 0xC4]))
            let synAck = try #require(sent.all.last { toPeer(from: port)($0) && $0[53] == 0x12 })
            await stack.feed(
                PacketBuilder.tcp(
                    from: peer, peerPort, to: local, port, sequence: 1001, acknowledgment: Segment.sequence(synAck) &+ 1, flags: 0x10))
        }
        // Port 4's connection is probed and, unanswered, reset after 1 s + 2 × 0.5 s; by
        // then port 22's, as old, has had no probe: nothing from it but its SYN-ACK.
        #expect(await sent.first { toPeer(from: 4)($0) && $0[53] & 0x04 != 0 } != nil)
        #expect(!sent.all.contains { toPeer(from: 22)($0) && $0[53] != 0x12 })
        #expect(await stack.countersOnLoop().openConnections == 1)
        await stack.shutdown()
    }
}

/// Records the errno of each error that reaches `errorCaught` (0: not an `IOError`).
private final class ErrorRecorder: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    let errnos = Mutex<[Int32]>([])

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        errnos.withLock { $0.append((error as? IOError)?.errnoCode ?? 0) }
    }
}
