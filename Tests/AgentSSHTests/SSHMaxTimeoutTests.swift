import AgentCore
import AgentTestSupport
import ArgumentParser
@testable import AgentSSH
import Foundation
import Testing

/// `--ssh-max-timeout`: the rule as a plain value over a manual clock, then real connections
/// the server closes (a silent client, and an active one past an absolute deadline) and one
/// it keeps (a live client answers the agent's keepalive probes).
@Suite(.serialized, .timeLimit(.minutes(3)))
struct SSHMaxTimeoutTests {
    typealias Instant = ManualClock.Instant
    static func at(_ seconds: Int) -> Instant { Instant(offset: .seconds(seconds)) }

    @Test func theFlagChoosesTheRule() {
        #expect(SSHTimeoutRule(maxTimeout: .seconds(72 * 3600)) == .silence(.seconds(72 * 3600)))
        #expect(SSHTimeoutRule(maxTimeout: .seconds(3)) == .silence(.seconds(3)))
        #expect(SSHTimeoutRule(maxTimeout: .milliseconds(2999)) == .absolute(.milliseconds(2999)))
        #expect(SSHTimeoutRule(maxTimeout: .zero) == .none)
        #expect(SSHTimeoutRule(maxTimeout: .seconds(-5)) == .none)
    }

    @Test func silenceIsProbedTwiceThenClosedAndEachArrivalStartsOver() {
        var timeout = SSHConnectionTimeout(rule: .silence(.seconds(9)), openedAt: Self.at(0))
        #expect(timeout.check(at: Self.at(0)) == .wake(at: Self.at(3)))
        #expect(timeout.check(at: Self.at(3)) == .probe)
        timeout.probed()
        #expect(timeout.check(at: Self.at(3)) == .wake(at: Self.at(6)))
        // The answer arrives: a new silence, probes from its start.
        timeout.received(at: Self.at(4))
        #expect(timeout.check(at: Self.at(6)) == .wake(at: Self.at(7)))
        #expect(timeout.check(at: Self.at(7)) == .probe)
        timeout.probed()
        #expect(timeout.check(at: Self.at(10)) == .probe)
        timeout.probed()
        // Two probes unanswered: nothing more is sent, the connection closes at the timeout.
        #expect(timeout.check(at: Self.at(10)) == .wake(at: Self.at(13)))
        #expect(timeout.check(at: Self.at(13)) == .close)
        // An arrival stamped earlier than one seen (reordered reads) moves nothing back.
        timeout.received(at: Self.at(2))
        #expect(timeout.deadline == Self.at(13))
    }

    @Test func anAbsoluteDeadlineIgnoresTraffic() {
        var timeout = SSHConnectionTimeout(rule: .absolute(.seconds(2)), openedAt: Self.at(100))
        #expect(timeout.check(at: Self.at(100)) == .wake(at: Self.at(102)))
        timeout.received(at: Self.at(101))
        #expect(timeout.check(at: Self.at(102)) == .close)
        let none = SSHConnectionTimeout<Instant>(rule: .none, openedAt: Self.at(0))
        #expect(none.check(at: Self.at(1_000_000)) == .idle && none.deadline == nil)
    }

    @Test func theFlagAndItsVariableAreParsed() throws {
        let options = try SSHOptions.parse(["--ssh-max-timeout", "90s"])
        #expect(try options.resolve(Settings(environment: [:])).maxTimeout == .seconds(90))
        #expect(try SSHOptions.parse([]).resolve(Settings(environment: ["CODER_AGENT_SSH_MAX_TIMEOUT": "1h30m"])).maxTimeout == .seconds(5400))
        #expect(try SSHOptions.parse([]).resolve(Settings(environment: [:])).maxTimeout == .seconds(72 * 3600))
        #expect(throws: ConfigurationError.self) { try SSHOptions.parse(["--ssh-max-timeout", "soon"]).resolve(Settings(environment: [:])) }
    }

    /// A client that sends its version line and then nothing is closed once the silence
    /// lasts the timeout.
    @Test func aSilentClientIsClosed() async throws {
        let server = try await SSHSessionTests.Server(timeoutRule: .silence(.seconds(3)))
        defer { Task { await server.stop() } }
        let client = try #require(await LoopbackSocket.connect(port: server.port))
        #expect(client.send("SSH-2.0-OpenSSH_9.2p1 silent\r\n"))
        let (bytes, closed) = await client.readAll(timeout: .seconds(60))
        #expect(String(decoding: bytes.prefix(8), as: UTF8.self) == "SSH-2.0-")
        #expect(closed, "the silent connection was left open")
    }

    /// Below 3 s the timeout is an absolute deadline: a running command's connection ends
    /// (OpenSSH reports 255) however active it is.
    @Test func anAbsoluteDeadlineEndsEvenABusyConnection() async throws {
        let server = try await SSHSessionTests.Server(timeoutRule: .absolute(.seconds(2)))
        defer { Task { await server.stop() } }
        // Busy for 20 s unless cut (a loaded host may cut it before the first tick).
        let outcome = await server.ssh("for i in $(seq 100); do echo tick; sleep 0.2; done; echo finished")
        #expect(outcome.status == 255, "\(outcome.status)")
        #expect(!outcome.stdout.contains("finished"), "\(outcome.stdout.suffix(100))")
    }

    /// The agent's keepalive probes keep a live client's silent session past the timeout:
    /// the client answers each (without probes it would be closed at 9 s).
    @Test func theAgentsProbesKeepALiveClientsSession() async throws {
        let server = try await SSHSessionTests.Server(timeoutRule: .silence(.seconds(9)))
        defer { Task { await server.stop() } }
        let outcome = await server.ssh("sleep 12; echo still here")
        #expect(outcome.status == 0 && outcome.stdout == "still here\n", "\(outcome)")
    }
}
