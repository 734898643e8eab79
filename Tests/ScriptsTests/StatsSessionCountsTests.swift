import AgentCore
import AgentProto
import AgentRPC
import AgentTestSupport
import ControlPlaneDouble
import Logging
import Synchronization
import Testing
@testable import Scripts

/// Session counts as the accepted Agent API version carries them, end to end over the real
/// wire: 2.11's `session_counts` map, or on a 2.10 control plane the four fixed fields.
@Suite(.timeLimit(.minutes(3)))
struct StatsSessionCountsTests {
    typealias Kit = ReporterTestKit

    static func counts() -> SessionCounts {
        let counts = SessionCounts()
        counts.started(.ssh)
        counts.started(.ssh)
        _ = counts.started(named: "cursor")
        counts.started(.reconnectingPTY)
        return counts
    }

    /// A report with sessions from the double at `server`, through an agent that asks for
    /// 2.11 and falls back to 2.10.
    static func report(from server: String) async throws -> (Coder_Agent_V2_Stats, [String]) {
        let double = ControlPlaneDouble(version: server)
        double.statsReportInterval.withLock { $0 = .seconds(1) }
        let result = Mutex<(Coder_Agent_V2_Stats, [String])?>(nil)
        try await double.run { url in
            let reporter = StatsReporter(traffic: TunnelTraffic(), sessions: Self.counts(), logger: Kit.quiet)
            var configuration = ControlPlaneSession.Configuration(agentVersion: "0.1.0")
            configuration.shutdownDeadline = .seconds(30)
            let session = ControlPlaneSession(
                configuration: configuration,
                dialer: WebSocketDialer(baseURL: url, token: double.token, version: "2.11", fallbackVersions: ["2.10"], logger: Kit.quiet),
                logger: Kit.quiet, participants: UpwardParticipants([Kit.Participant(name: "stats") { try await reporter.run(on: $0) }]))
            let running = Task { try await session.run() }
            // The probe, then one report with stats.
            #expect(await eventually(timeout: Kit.patience) { double.recorded.withLock { $0.statsRequests.contains(where: \.hasStats) } })
            session.beginShutdown()
            try await running.value
            let stats = try #require(double.recorded.withLock { $0.statsRequests.first(where: \.hasStats) }).stats
            result.withLock { $0 = (stats, double.recorded.withLock { $0.queries }) }
        }
        return try #require(result.withLock { $0 })
    }

    @Test func aVersion211ControlPlaneGetsTheMap() async throws {
        let (stats, queries) = try await Self.report(from: "2.11")
        #expect(queries == ["version=2.11&role=agent"])
        #expect(stats.sessionCounts == ["ssh": 2, "cursor": 1, "reconnecting_pty": 1])
        #expect(stats.sessionCountSsh == 0 && stats.sessionCountVscode == 0 && stats.sessionCountReconnectingPty == 0)
    }

    @Test func aVersion210ControlPlaneGetsTheFixedFields() async throws {
        let (stats, queries) = try await Self.report(from: "2.10")
        #expect(queries == ["version=2.11&role=agent", "version=2.10&role=agent"])
        #expect(stats.sessionCounts.isEmpty, "a 2.10 server ignores field 13: not sent")
        #expect(stats.sessionCountSsh == 2 && stats.sessionCountReconnectingPty == 1)
        #expect(stats.sessionCountVscode == 0 && stats.sessionCountJetbrains == 0, "other names have no field of their own")
    }
}
