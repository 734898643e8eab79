import AgentCore
import AgentTestSupport
@testable import AgentSSH
import Synchronization
import Testing

/// The handshake deadline and the per-source caps as plain values over a manual clock: no
/// sockets, no server, so these tests run side by side (no serialization needed).
@Suite(.timeLimit(.minutes(3)))
struct SSHConnectionLimitValueTests {
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
}
