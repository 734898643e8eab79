import AgentCore
import AgentRPC
import AgentTestSupport
import ControlPlaneDouble
@testable import HostStats
import Logging
import SwiftProtobuf
import Synchronization
import Testing

/// The resource monitor on a real upward session (WebSocket, yamux, dRPC) to the
/// control-plane double, reading this machine: the configuration is asked for once per
/// connection, the first push carries a full window of this host's memory and `/`, and a
/// new connection starts a new window.
@Suite(.timeLimit(.minutes(3)))
struct ResourcesMonitorEndToEndTests {
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    /// How long a wait may take on a loaded host (a passing wait returns at once).
    static let patience: Duration = .seconds(90)

    /// A session with the double (API 2.10) whose only participant is `monitor`.
    static func session(url: String, double: ControlPlaneDouble, monitor: some UpwardParticipant) -> ControlPlaneSession {
        var configuration = ControlPlaneSession.Configuration(agentVersion: "0.1.0")
        configuration.shutdownDeadline = .seconds(30)
        return ControlPlaneSession(
            configuration: configuration,
            dialer: WebSocketDialer(baseURL: url, token: double.token, version: "2.10", logger: quiet),
            logger: quiet, participants: UpwardParticipants([monitor]))
    }

    @Test func pushesReachTheControlPlaneDoubleAndEachConnectionStartsOver() async throws {
        let double = ControlPlaneDouble()
        let served = double.serveResourcesMonitoring(
            ControlPlaneDouble.resourcesMonitoringConfiguration(datapoints: 2, intervalSeconds: 10, memory: true, volumes: ["/", "/does-not-exist"]))
        let clock = ManualClock()
        let log = CapturedLog()
        let monitor = ResourcesMonitor(clock: clock, logger: log.logger)
        try await double.run { url in
            let session = Self.session(url: url, double: double, monitor: monitor)
            let running = Task { try await session.run() }
            defer { running.cancel() }

            #expect(await eventually(timeout: Self.patience) { clock.sleeping == 1 }, "\(log.text)")
            #expect(served.state.withLock { $0.configurationCalls } == 1)
            clock.advance(by: .seconds(10))
            #expect(await eventually(timeout: Self.patience) { clock.sleeping == 1 && log.contains("failed to fetch volume") })
            #expect(served.state.withLock { $0.pushes.isEmpty })
            clock.advance(by: .seconds(10))
            #expect(await eventually(timeout: Self.patience) { served.state.withLock { $0.pushes.count } == 1 }, "\(log.text)")

            let push = try #require(served.state.withLock { $0.pushes.first })
            #expect(push.datapoints.count == 2)
            for point in push.datapoints {
                // This host's memory and root file system, within sanity.
                #expect(point.hasMemory && point.memory.total > 0 && point.memory.used > 0 && point.memory.used <= point.memory.total)
                #expect(point.volumes.map(\.volume) == ["/"])
                #expect(point.volumes.allSatisfy { $0.total > 0 && $0.used > 0 && $0.used <= $0.total })
                #expect(point.collectedAt.seconds > 1_700_000_000)
            }

            // A new connection asks again and fills a new window before pushing.
            await double.dropConnections()
            #expect(
                await eventually(timeout: Self.patience) {
                    served.state.withLock { $0.configurationCalls } == 2 && clock.sleeping == 1
                }, "\(log.text)")
            clock.advance(by: .seconds(10))
            #expect(await eventually(timeout: Self.patience) { log.all.filter { $0.message == "failed to fetch volume" }.count >= 3 })
            #expect(served.state.withLock { $0.pushes.count } == 1)
            clock.advance(by: .seconds(10))
            #expect(await eventually(timeout: Self.patience) { served.state.withLock { $0.pushes.count } == 2 }, "\(log.text)")
            session.beginShutdown()
            try await running.value
        }
    }

    /// A volume whose `statfs` never returns (a dead hard-mounted NFS server) does not hold
    /// the session: the connection drops while the monitor waits for that call, the agent
    /// reconnects and asks for the configuration again, and the new session's monitor
    /// reports the other volume without calling `statfs` on the stuck one again.
    @Test func aStuckVolumeDoesNotHoldTheReconnect() async throws {
        let double = ControlPlaneDouble()
        let served = double.serveResourcesMonitoring(
            ControlPlaneDouble.resourcesMonitoringConfiguration(datapoints: 1, intervalSeconds: 10, memory: true, volumes: ["/", "/stuck"]))
        let clock = ManualClock()
        let log = CapturedLog()
        let stuck = StuckStatfs("/stuck")
        defer { stuck.release() }
        let reads = VolumeReads(pool: BlockingPool(name: "statfs-e2e", threads: 2, maxQueued: 16))
        let monitor = ResourcesMonitor(
            clock: clock, now: ResourcesMonitorClock.wallClock,
            makeStatter: { () throws(StatError) in try HostStatter(diskUsage: { stuck.statfs($0) }) }, volumeReads: reads,
            logger: log.logger)
        try await double.run { url in
            let session = Self.session(url: url, double: double, monitor: monitor)
            let running = Task { try await session.run() }
            defer { running.cancel() }

            #expect(await eventually(timeout: Self.patience) { clock.sleeping == 1 }, "\(log.text)")
            clock.advance(by: .seconds(10))
            #expect(
                await eventually(timeout: Self.patience) { stuck.blocked == 1 && reads.outstanding == ["/stuck"] && clock.sleeping == 1 },
                "\(log.text)")

            await double.dropConnections()
            #expect(
                await eventually(timeout: Self.patience) {
                    served.state.withLock { $0.configurationCalls } == 2 && clock.sleeping == 1
                }, "\(log.text)")
            #expect(stuck.blocked == 1, "the first call is still blocked")
            clock.advance(by: .seconds(10))
            #expect(await eventually(timeout: Self.patience) { served.state.withLock { $0.pushes.count } == 1 }, "\(log.text)")
            let point = try #require(served.state.withLock { $0.pushes.first?.datapoints.first })
            #expect(point.hasMemory && point.volumes.map(\.volume) == ["/"])
            #expect(stuck.calls("/stuck") == 1)
            session.beginShutdown()
            try await running.value
        }
    }
}
