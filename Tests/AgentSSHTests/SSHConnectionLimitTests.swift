import AgentCore
import AgentTestSupport
@testable import AgentSSH
import Foundation
import Testing

/// Connections that never authenticate cannot lock SSH out, with real sockets and OpenSSH's
/// client: idle connections fill the loopback cap and a newcomer still gets in, and the
/// handshake deadline closes an unauthenticated connection (SSHConnectionLimitValueTests has
/// the same rules as plain values). Serialized: the 256-connection flood should not load the
/// host while the other test's `ssh` has to authenticate within a 5 s handshake deadline.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct SSHConnectionLimitTests {
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
