import AgentTestSupport
import Foundation
import Glibc
import NIOCore
import Synchronization
import Testing

@testable import TunnelStack

/// A peer that uses a port again. After the workspace closed first, lwIP holds the old
/// connection in TIME_WAIT (2 min): a SYN newer than it opens a new one at once, an older
/// one is answered from TIME_WAIT without a local connect. A peer that restarted while its
/// connection was open gets a challenge ACK (one per interval), resets the old connection
/// with its answer, and connects anew. Hand-built packets against real lwIP and a real local
/// service, then a real Linux client in a namespace.
@Suite(.serialized)
struct TunnelStackPortReuseTests {
    let peer = TunnelAddress("fd7a:115c:a1e0::79")!
    let peerPort: UInt16 = 45000

    @Test func aNewerSYNOnATimeWaitFlowOpensANewConnectionAndAnOlderOneDoesNot() async throws {
        let server = try #require(
            LocalServer(connections: 2) { connection, index in
                _ = writeAll(connection, Array((index == 0 ? "one" : "two").utf8))
            })
        let sent = PacketLog()
        let stack = try await TunnelStack.start(
            addresses: stackAddresses(0x53), configuration: TunnelStackConfiguration(), eventLoop: lwIPTestLoop,
            output: { packet in sent.append(Array(packet)) }, acceptors: [:])
        let local = stack.addresses[0]
        let port = UInt16(server.port)
        func segment(sequence: UInt32, acknowledgment: UInt32 = 0, flags: UInt8) -> [UInt8] {
            PacketBuilder.tcp(
                from: peer, peerPort, to: local, port, sequence: sequence, acknowledgment: acknowledgment, flags: flags,
                options: flags == 0x02 ? [2, 4, 0x04, 0xC4] : [])
        }

        // The first connection: the service answers and closes first, so the peer's FIN ends
        // it in lwIP's TIME_WAIT.
        await stack.feed(segment(sequence: 1000, flags: 0x02))
        let firstSynAck = try #require(await sent.first { $0[53] == 0x12 })
        let server1 = Segment.sequence(firstSynAck) &+ 1
        await stack.feed(segment(sequence: 1001, acknowledgment: server1, flags: 0x10))
        let fin = try #require(await sent.first { $0[53] & 0x01 != 0 })
        let payload = fin.count - 60
        #expect(payload == 3 || payload == 0)
        let finEnd = Segment.sequence(fin) &+ UInt32(payload) &+ 1
        sent.clear()
        await stack.feed(segment(sequence: 1001, acknowledgment: finEnd, flags: 0x11))
        // lwIP acknowledges the peer's FIN (rcv_nxt 1002) and waits in TIME_WAIT.
        #expect(await sent.first { Segment.acknowledgment($0) == 1002 && $0[53] == 0x10 } != nil)
        // The relay ends (and lets go of the pcb) once both ends closed.
        let ended = await eventually(timeout: .seconds(20)) { await stack.countersOnLoop().openConnections == 0 }
        #expect(ended)
        #expect(await stack.countersOnLoop().accepted == 1)

        // An older SYN (an old duplicate): TIME_WAIT answers it, nothing connects locally.
        sent.clear()
        await stack.feed(segment(sequence: 500, flags: 0x02))
        let afterOld = await stack.countersOnLoop()
        #expect(afterOld.halfOpenConnections == 0)
        #expect(afterOld.timeWaitReused == 0)
        #expect(!sent.all.contains { $0[53] & 0x02 != 0 })

        // A newer SYN: a new connection at once, to the service's next accept.
        sent.clear()
        await stack.feed(segment(sequence: 70_000, flags: 0x02))
        let synAck = try #require(await sent.first { $0[53] == 0x12 })
        #expect(Segment.acknowledgment(synAck) == 70_001)
        await stack.feed(segment(sequence: 70_001, acknowledgment: Segment.sequence(synAck) &+ 1, flags: 0x10))
        let second = try #require(await sent.first { $0.count > 60 && $0[53] & 0x02 == 0 })
        #expect(Array(second[60...]) == Array("two".utf8))
        let counters = await stack.countersOnLoop()
        #expect(counters.timeWaitReused == 1)
        #expect(counters.accepted == 2)
        await server.finished.wait(upTo: .seconds(20))
        #expect(server.finished.isSet)
        server.stop()
        await stack.shutdown()
    }

    @Test func aSYNOnAnOpenConnectionGetsAChallengeACKWhoseResetEndsIt() async throws {
        let sent = PacketLog()
        let accepted = AcceptedChannel()
        let acceptor = TunnelAcceptor { channel in
            accepted.channel.withLock { $0 = channel }
            return channel.eventLoop.makeSucceededVoidFuture()
        }
        let clock = ManualClock()
        var configuration = TunnelStackConfiguration()
        configuration.clock = { clock.now() }
        let stack = try await TunnelStack.start(
            addresses: stackAddresses(0x54), configuration: configuration, eventLoop: lwIPTestLoop,
            output: { packet in sent.append(Array(packet)) }, acceptors: [4: acceptor])
        let local = stack.addresses[0]
        func segment(sequence: UInt32, acknowledgment: UInt32 = 0, flags: UInt8) -> [UInt8] {
            PacketBuilder.tcp(
                from: peer, peerPort, to: local, 4, sequence: sequence, acknowledgment: acknowledgment, flags: flags,
                options: flags == 0x02 ? [2, 4, 0x04, 0xC4] : [])
        }
        await stack.feed(segment(sequence: 1000, flags: 0x02))
        let synAck = try #require(sent.all.last)
        #expect(synAck[53] == 0x12)
        let next = Segment.sequence(synAck) &+ 1
        await stack.feed(segment(sequence: 1001, acknowledgment: next, flags: 0x10))
        let opened = await eventually(timeout: .seconds(20)) { await stack.countersOnLoop().openConnections == 1 }
        #expect(opened)

        // The peer restarted and sends a SYN from the same port: an ACK of what the old
        // connection received, nothing else.
        sent.clear()
        await stack.feed(segment(sequence: 900_000, flags: 0x02))
        let challenge = try #require(sent.all.first)
        #expect(sent.count == 1)
        #expect(challenge[53] & 0x17 == 0x10)
        #expect(Segment.acknowledgment(challenge) == 1001 && Segment.sequence(challenge) == next)
        #expect(await stack.countersOnLoop().challengeAcks == 1)

        // The same SYN again within the interval: dropped unanswered; past it, answered.
        sent.clear()
        await stack.feed(segment(sequence: 900_000, flags: 0x02))
        #expect(sent.count == 0)
        #expect(await stack.countersOnLoop().challengeAcksLimited == 1)
        clock.advance(by: configuration.challengeAckInterval)
        await stack.feed(segment(sequence: 900_000, flags: 0x02))
        #expect(sent.count == 1 && sent.all.first.map { Segment.acknowledgment($0) } == 1001)
        #expect(await stack.countersOnLoop().challengeAcks == 2)

        // Its reset (sequence number: the ACK's acknowledgment) ends the old connection; the
        // SYN again opens a new one.
        await stack.feed(segment(sequence: Segment.acknowledgment(challenge), flags: 0x04))
        let ended = await eventually(timeout: .seconds(20)) { await stack.countersOnLoop().openConnections == 0 }
        #expect(ended)
        sent.clear()
        await stack.feed(segment(sequence: 900_000, flags: 0x02))
        let again = try #require(sent.all.first)
        #expect(again[53] == 0x12 && Segment.acknowledgment(again) == 900_001)
        await stack.shutdown()
    }

    @Test func timeWaitStaysWithinItsBoundOldestFirst() async throws {
        let sent = PacketLog()
        let accepted = AcceptedChannel()
        let acceptor = TunnelAcceptor { channel in
            accepted.channel.withLock { $0 = channel }
            return channel.eventLoop.makeSucceededVoidFuture()
        }
        var configuration = TunnelStackConfiguration()
        configuration.maxTimeWait = 1
        let stack = try await TunnelStack.start(
            addresses: stackAddresses(0x58), configuration: configuration, eventLoop: lwIPTestLoop,
            output: { packet in sent.append(Array(packet)) }, acceptors: [4: acceptor])
        let local = stack.addresses[0]
        func segment(_ port: UInt16, sequence: UInt32, acknowledgment: UInt32 = 0, flags: UInt8) -> [UInt8] {
            PacketBuilder.tcp(
                from: peer, port, to: local, 4, sequence: sequence, acknowledgment: acknowledgment, flags: flags,
                options: flags == 0x02 ? [2, 4, 0x04, 0xC4] : [])
        }
        // Two connections, each closed by the workspace first and left in TIME_WAIT.
        for port: UInt16 in [45100, 45101] {
            sent.clear()
            await stack.feed(segment(port, sequence: 1000, flags: 0x02))
            let synAck = try #require(sent.all.last)
            #expect(synAck[53] == 0x12)
            await stack.feed(segment(port, sequence: 1001, acknowledgment: Segment.sequence(synAck) &+ 1, flags: 0x10))
            // The acceptor gets the channel on the loop's next turn: waited for, not assumed.
            #expect(await eventually(timeout: .seconds(20)) { accepted.channel.withLock { $0 } != nil })
            let channel = try #require(
                accepted.channel.withLock { c in
                    defer { c = nil }
                    return c
                })
            try await channel.close().get()
            let fin = try #require(await sent.first { $0[53] & 0x01 != 0 })
            await stack.feed(segment(port, sequence: 1001, acknowledgment: Segment.sequence(fin) &+ 1, flags: 0x11))
            #expect(await sent.first { Segment.acknowledgment($0) == 1002 && $0[53] == 0x10 } != nil)
        }
        // An old duplicate SYN for the first: past the bound of one, that TIME_WAIT went when
        // the second connection's SYN came, or goes now (oldest first), so the listener
        // answers it.
        sent.clear()
        await stack.feed(segment(45100, sequence: 500, flags: 0x02))
        let answer = try #require(sent.all.first)
        #expect(answer[53] == 0x12 && Segment.acknowledgment(answer) == 501)
        #expect(await stack.countersOnLoop().timeWaitReused == 0)
        await stack.shutdown()
    }

    @Test func aLinuxClientThatReusesItsPortConnectsAgainAtOnce() async throws {
        let server = try #require(
            LocalServer(connections: 2) { connection, index in
                _ = writeAll(connection, Array("hello \(index)".utf8))
            })
        let tunnel = try await NamespaceTunnel.make(addresses: stackAddresses(0x25))
        // The second connection binds the first one's port. The first socket may still be in
        // LAST_ACK for a moment (EADDRNOTAVAIL): retried, bounded.
        let script = """
            import errno, socket, time
            port = 0
            for i in range(2):
                for attempt in range(200):
                    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.settimeout(10)
                    s.bind(('::', port))
                    port = s.getsockname()[1]
                    try:
                        s.connect(('\(tunnel.addresses[0])', \(server.port)))
                        break
                    except OSError as error:
                        s.close()
                        if error.errno != errno.EADDRNOTAVAIL:
                            print('round', i, 'failed:', type(error).__name__, error)
                            raise SystemExit
                        time.sleep(0.01)
                chunks = []
                while True:
                    data = s.recv(100)
                    if not data:
                        break
                    chunks.append(data)
                s.close()
                print('round', i, 'port', port, b''.join(chunks).decode())
            """
        let outcome = await tunnel.python(script)
        #expect(outcome.stdout.contains("round 0 port"), tunnel.report(outcome))
        #expect(outcome.stdout.contains("hello 1"), tunnel.report(outcome))
        #expect(tunnel.stack.counters().timeWaitReused == 1)
        await server.finished.wait(upTo: .seconds(20))
        server.stop()
        await tunnel.close()
    }
}
