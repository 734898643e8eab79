import AgentCore
import AgentTestSupport
@testable import AgentSSH
import Foundation
import Synchronization
import Testing

/// Connections that never authenticate cannot lock SSH out: each has a handshake deadline,
/// a full source closes its oldest unauthenticated connection for a newcomer, and the
/// tailnet and the loopback listener have caps of their own. As plain values over a manual
/// clock, then with real sockets and OpenSSH's client.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct SSHConnectionLimitTests {
    typealias Instant = ManualClock.Instant
    static func at(_ seconds: Int) -> Instant { Instant(offset: .seconds(seconds)) }

    @Test func anUnauthenticatedConnectionHasUntilTheHandshakeDeadline() {
        var timeout = SSHConnectionTimeout(rule: .silence(.seconds(72 * 3600)), handshake: .seconds(60), openedAt: Self.at(0))
        #expect(timeout.check(at: Self.at(0)) == .wake(at: Self.at(60)))
        // Bytes are not authentication: a client sending its version line only is still cut.
        timeout.received(at: Self.at(30))
        #expect(timeout.check(at: Self.at(59)) == .wake(at: Self.at(60)))
        #expect(timeout.check(at: Self.at(60)) == .closeUnauthenticated)
        // Authenticated in time: the rule alone from then on.
        timeout.authenticated()
        #expect(timeout.check(at: Self.at(60)) == .wake(at: Self.at(30 + 24 * 3600)))
    }

    @Test func theHandshakeDeadlineComesOnTopOfEveryRule() {
        let none = SSHConnectionTimeout<Instant>(rule: .none, handshake: .seconds(60), openedAt: Self.at(0))
        #expect(none.check(at: Self.at(0)) == .wake(at: Self.at(60)))
        #expect(none.check(at: Self.at(61)) == .closeUnauthenticated)
        // A shorter absolute rule still ends the connection first.
        let absolute = SSHConnectionTimeout<Instant>(rule: .absolute(.seconds(2)), handshake: .seconds(60), openedAt: Self.at(0))
        #expect(absolute.check(at: Self.at(0)) == .wake(at: Self.at(2)))
        #expect(absolute.check(at: Self.at(2)) == .close)
        #expect(SSHConnectionLimits().handshakeTimeout == .seconds(60))
        #expect(SSHConnectionLimits().maxConnectionsPerSource == 256)
    }

    /// A full source closes its oldest unauthenticated connection for a newcomer and refuses
    /// one only when all have authenticated; the other source is untouched.
    @Test func aFullSourceEvictsItsOldestUnauthenticatedAndLeavesTheOtherAlone() throws {
        let connections = SSHConnections(maxPerSource: 2)
        let closed = Mutex<[String]>([])
        func admit(_ name: String, _ source: SSHConnectionSource) -> ConnectionRegistry.Connection? {
            connections.admit(from: source) { closed.withLock { $0.append(name) } }
        }
        let first = try #require(admit("first", .loopback))
        let second = try #require(admit("second", .loopback))
        connections.authenticated(first, from: .loopback)
        // Full: the newcomer closes the unauthenticated one, never the authenticated one.
        let third = try #require(admit("third", .loopback))
        #expect(closed.withLock { $0 } == ["second"])
        connections.closed(second, from: .loopback)
        connections.authenticated(third, from: .loopback)
        // Full of authenticated connections: refused.
        #expect(admit("fourth", .loopback) == nil)
        #expect(connections.registry(.loopback).counters == (evicted: 1, refused: 1))
        // The tailnet's cap is its own.
        #expect(admit("tailnet one", .tailnet) != nil)
        #expect(admit("tailnet two", .tailnet) != nil)
        #expect(closed.withLock { $0 } == ["second"])
    }

    /// Idle TCP connections (silent, or a version line only) fill the real cap (256); OpenSSH's
    /// client still gets in, closing the oldest of them.
    @Test func idleConnectionsCannotLockOpenSSHOut() async throws {
        LoopbackSocket.raiseDescriptorLimit()
        let server = try await SSHSessionTests.Server()
        defer { Task { await server.stop() } }
        let cap = SSHConnectionLimits.defaultMaxConnectionsPerSource
        var idle: [LoopbackSocket] = []
        for index in 0..<cap {
            let socket = try #require(await LoopbackSocket.connect(port: server.port))
            if index % 2 == 1 { #expect(socket.send("SSH-2.0-x\r\n")) }
            idle.append(socket)
        }
        let registry = server.server.connections.registry(.loopback)
        #expect(await eventually(timeout: .seconds(60)) { registry.count == cap }, "\(registry.count) admitted")
        let outcome = await server.ssh("echo in")
        #expect(outcome.status == 0 && outcome.stdout == "in\n", "\(outcome)")
        #expect(registry.counters.evicted >= 1)
        // The first idle connection was the one closed.
        #expect(await idle[0].isClosedByPeer(within: .seconds(60)))
        _ = idle
    }

    /// A connection that does not authenticate within the handshake deadline is closed,
    /// whatever `--ssh-max-timeout` says; one that authenticated outlives the deadline.
    @Test func theHandshakeDeadlineClosesAnUnauthenticatedConnection() async throws {
        var limits = SSHConnectionLimits()
        limits.handshakeTimeout = .seconds(5)
        let server = try await SSHSessionTests.Server(limits: limits)
        defer { Task { await server.stop() } }
        // An authenticated session, running before the idle connection opens.
        let session = try #require(
            ChildProgram.start(
                ["ssh"] + SSHClientEdgeTests.options + ["-p", "\(server.port)", "127.0.0.1", "read line; echo after $line"]))
        #expect(await eventually(timeout: .seconds(60)) { server.server.sessions.count == 1 })
        let client = try #require(await LoopbackSocket.connect(port: server.port))
        #expect(client.send("SSH-2.0-OpenSSH_9.2p1 idle\r\n"))
        let (bytes, closed) = await client.readAll(timeout: .seconds(60))
        #expect(String(decoding: bytes.prefix(8), as: UTF8.self) == "SSH-2.0-")
        #expect(closed, "the unauthenticated connection was left open")
        // The session's own deadline passed before the idle one's: it still runs.
        _ = write(session.stdin, "the deadline\n", 13)
        #expect(await onThread { session.wait() } == 0)
    }
}
