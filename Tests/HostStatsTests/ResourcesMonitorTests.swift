import AgentCore
import AgentProto
import AgentTestSupport
import ControlPlaneDouble
@testable import HostStats
import Logging
import SwiftProtobuf
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The resource monitor as a state machine on a manual clock, against a recording session:
/// the window fills before the first push, then each tick pushes it whole; what fails to
/// read is left out and logged; disabled monitors still give datapoints; a failed push is
/// logged and retried at the next tick; an unusable configuration ends it for the session.
@Suite(.timeLimit(.minutes(2)))
struct ResourcesMonitorTests {
    typealias Configuration = ResourcesMonitoring_GetResourcesMonitoringConfigurationResponse
    typealias Push = ResourcesMonitoring_PushResourcesMonitoringUsageRequest

    /// A session that answers the configuration and records pushes (or fails them).
    final class RecordingSession: UpwardSession {
        struct State {
            var calls: [String] = []
            var pushes: [Push] = []
            var failPushes = false
            /// The configuration's next calls that fail (a transient error), then it is answered.
            var failConfiguration = 0
        }

        let number = 1
        let configuration: Result<Configuration, UpwardStreamError>
        let state = Mutex(State())

        init(_ configuration: Result<Configuration, UpwardStreamError>) {
            self.configuration = configuration
        }

        var pushes: [Push] { state.withLock { $0.pushes } }

        func unary(_ rpc: String, request: [UInt8], maxMessageBytes: Int) async throws(UpwardStreamError) -> [UInt8] {
            state.withLock { $0.calls.append(rpc) }
            if rpc.hasSuffix("/GetResourcesMonitoringConfiguration") {
                let fail = state.withLock { state -> Bool in
                    defer { state.failConfiguration = max(0, state.failConfiguration - 1) }
                    return state.failConfiguration > 0
                }
                if fail { throw UpwardStreamError(.remote(code: 0, message: "database is down")) }
                if case .failure(let error) = configuration { throw error }
                return (try? configuration.get().serializedBytes()) ?? []
            }
            guard let push = try? Push(serializedBytes: request) else { throw UpwardStreamError(.protocolViolation) }
            let fail = state.withLock { state -> Bool in
                if !state.failPushes { state.pushes.append(push) }
                return state.failPushes
            }
            if fail { throw UpwardStreamError(.remote(code: 0, message: "database is down")) }
            return (try? ResourcesMonitoring_PushResourcesMonitoringUsageResponse().serializedBytes()) ?? []
        }

        func serverStream(_ rpc: String, request: [UInt8], maxMessageBytes: Int) async throws(UpwardStreamError) -> UpwardMessages {
            throw UpwardStreamError(.unsupported)
        }

        func bidiStream(_ rpc: String, maxMessageBytes: Int) async throws(UpwardStreamError) -> UpwardBidiStream {
            throw UpwardStreamError(.unsupported)
        }
    }

    /// A monitor on `clock` over a host with 8 GiB (6 available) and a disk at `/` only,
    /// with its ticks counted.
    final class Rig: Sendable {
        let clock = ManualClock()
        let log = CapturedLog()
        let ticks = Mutex(0)
        let session: RecordingSession
        let files: MemoryFileSystem

        init(_ configuration: Result<Configuration, UpwardStreamError>, files: MemoryFileSystem = Rig.host) {
            session = RecordingSession(configuration)
            self.files = files
        }

        static var host: MemoryFileSystem {
            MemoryFileSystem(files: [
                "/proc/stat": "cpu 1 2 3 4\n", "/proc/cpuinfo": "processor : 0\n",
                "/proc/meminfo": "MemTotal: 8388608 kB\nMemAvailable: 6291456 kB\n", "/proc/1/cgroup": "0::/init.scope\n",
            ])
        }

        static let disk = ResourcesDatapoint.Usage(total: 4_096_000, used: 2_867_200)

        var monitor: ResourcesMonitor<ManualClock> {
            let (clock, files) = (clock, files)
            return ResourcesMonitor(
                clock: clock,
                now: {
                    self.ticks.withLock { $0 += 1 }
                    return Google_Protobuf_Timestamp(seconds: 1_700_000_000 + clock.now.offset.components.seconds, nanos: 0)
                },
                makeStatter: { () throws(StatError) in
                    try HostStatter(fileSystem: files) { _ in
                    } diskUsage: { path in
                        path == "/" ? .success(DiskUsage(blocks: 1000, freeBlocks: 300, blockSize: 4096)) : .failure(DiskError(errno: ENOENT))
                    }
                },
                logger: log.logger)
        }

        /// Starts the monitor and waits for its first sleep.
        func start() async throws -> Task<Void, any Error> {
            let (monitor, session) = (monitor, session)
            let task = Task { try await monitor.run(on: session) }
            #expect(await eventually { clock.sleeping == 1 }, "\(log.text)")
            return task
        }

        /// Moves the clock one interval and waits until that tick is done (the monitor sleeps again).
        func tick(_ interval: Duration = .seconds(10)) async {
            let before = ticks.withLock { $0 }
            clock.advance(by: interval)
            #expect(await eventually { ticks.withLock { $0 } == before + 1 && clock.sleeping == 1 }, "\(log.text)")
        }
    }

    @Test func theWindowFillsBeforeTheFirstPushThenEveryTickPushesItWhole() async throws {
        let configuration = ControlPlaneDouble.resourcesMonitoringConfiguration(datapoints: 3, memory: true, volumes: ["/", "/gone"])
        let rig = Rig(.success(configuration))
        let task = try await rig.start()
        defer { task.cancel() }
        await rig.tick()
        await rig.tick()
        #expect(rig.session.pushes.isEmpty)
        await rig.tick()
        let first = try #require(rig.session.pushes.first)
        #expect(first.datapoints.map(\.collectedAt.seconds) == [1_700_000_010, 1_700_000_020, 1_700_000_030])
        let point = try #require(first.datapoints.first)
        #expect(point.hasMemory && point.memory.total == 8 << 30 && point.memory.used == 2 << 30)
        // The volume that cannot be read is left out, and logged.
        #expect(point.volumes.map(\.volume) == ["/"])
        #expect(point.volumes.first.map { [$0.total, $0.used] } == [Rig.disk.total, Rig.disk.used])
        #expect(rig.log.all.contains { $0.level == .error && $0.message == "failed to fetch volume" && $0.metadata["volume"] == "/gone" })

        await rig.tick()
        #expect(rig.session.pushes.count == 2)
        #expect(rig.session.pushes.last?.datapoints.map(\.collectedAt.seconds) == [1_700_000_020, 1_700_000_030, 1_700_000_040])
        let calls = rig.session.state.withLock { $0.calls }
        #expect(calls.filter { $0.hasSuffix("GetResourcesMonitoringConfiguration") }.count == 1)
    }

    @Test func disabledMonitorsStillGiveTimestampedDatapoints() async throws {
        var configuration = ControlPlaneDouble.resourcesMonitoringConfiguration(datapoints: 2, memory: false, volumes: ["/"])
        configuration.volumes[0].enabled = false
        for memory in [false, nil] as [Bool?] {
            var shape = configuration
            if memory == nil { shape.clearMemory() }
            let rig = Rig(.success(shape))
            let task = try await rig.start()
            await rig.tick()
            await rig.tick()
            task.cancel()
            let push = try #require(rig.session.pushes.first)
            #expect(push.datapoints.count == 2)
            #expect(push.datapoints.allSatisfy { !$0.hasMemory && $0.volumes.isEmpty && $0.hasCollectedAt })
        }
    }

    @Test func aContainerWithoutAMemoryLimitReportsTheHostsTotal() async throws {
        var files = Rig.host
        files.cgroup2 = true
        files.files["/proc/1/cgroup"] = Array("0::/docker/abc\n".utf8)
        files.files["/proc/self/cgroup"] = Array("0::/docker/abc\n".utf8)
        files.files["/sys/fs/cgroup/docker/abc/memory.max"] = Array("max\n".utf8)
        files.files["/sys/fs/cgroup/docker/abc/memory.current"] = Array("3000\n".utf8)
        files.files["/sys/fs/cgroup/docker/abc/memory.stat"] = Array("inactive_file 1000\n".utf8)
        let rig = Rig(.success(ControlPlaneDouble.resourcesMonitoringConfiguration(datapoints: 1, memory: true, volumes: [])), files: files)
        let task = try await rig.start()
        defer { task.cancel() }
        await rig.tick()
        let point = try #require(rig.session.pushes.first?.datapoints.first)
        #expect(point.memory.used == 2000 && point.memory.total == 8 << 30)
    }

    @Test func aFailedReadingOrPushIsLoggedAndTheNextTickPushesAgain() async throws {
        var files = Rig.host
        files.files["/proc/meminfo"] = nil
        let rig = Rig(.success(ControlPlaneDouble.resourcesMonitoringConfiguration(datapoints: 1, memory: true, volumes: ["/"])), files: files)
        rig.session.state.withLock { $0.failPushes = true }
        let task = try await rig.start()
        defer { task.cancel() }
        await rig.tick()
        #expect(rig.log.all.contains { $0.message == "failed to fetch memory" && ($0.metadata["error"] ?? "").hasPrefix("fetch host memory: get memory info:") })
        #expect(rig.log.all.contains { $0.level == .error && $0.message == "failed to push resources monitoring usage" })
        rig.session.state.withLock { $0.failPushes = false }
        await rig.tick()
        let point = try #require(rig.session.pushes.first?.datapoints.first)
        #expect(!point.hasMemory && point.volumes.count == 1)
        // Ticks missed while the clock jumped are dropped, not run in a burst.
        await rig.tick(.seconds(35))
        #expect(rig.session.pushes.count == 2)
    }

    @Test func aFailedConfigurationCallIsAskedAgainWithGrowingWaits() async throws {
        let rig = Rig(.success(ControlPlaneDouble.resourcesMonitoringConfiguration(datapoints: 1, memory: true)))
        rig.session.state.withLock { $0.failConfiguration = 2 }
        let (monitor, session, clock) = (rig.monitor, rig.session, rig.clock)
        let task = Task { try await monitor.run(on: session) }
        defer { task.cancel() }
        let calls = { session.state.withLock { $0.calls.count } }
        #expect(await eventually { calls() == 1 && clock.sleeping == 1 }, "\(rig.log.text)")
        clock.advance(by: .milliseconds(999))
        #expect(clock.sleeping == 1 && calls() == 1, "not before its second")
        clock.advance(by: .milliseconds(1))
        #expect(await eventually { calls() == 2 && clock.sleeping == 1 }, "\(rig.log.text)")
        clock.advance(by: .seconds(1))
        #expect(clock.sleeping == 1 && calls() == 2, "the second wait is two seconds")
        clock.advance(by: .seconds(1))
        // Answered: the monitor starts ticking, and its first tick pushes (one datapoint).
        #expect(await eventually { calls() == 3 && clock.sleeping == 1 }, "\(rig.log.text)")
        await rig.tick()
        #expect(await eventually { rig.session.pushes.count == 1 }, "\(rig.log.text)")
        #expect(rig.log.text.contains("asking again"))
    }

    @Test func anUnusableConfigurationEndsTheMonitorForTheSession() async throws {
        for kind in [UpwardStreamError.Kind.unsupported, .sessionEnded] {
            let failing = Rig(.failure(UpwardStreamError(kind)))
            await #expect(throws: ResourcesMonitorFailure.self) { try await failing.monitor.run(on: failing.session) }
            #expect(failing.session.state.withLock { $0.calls.count } == 1, "asked once: \(kind)")
        }
        for (datapoints, seconds) in [(0, 10), (20, 0), (-1, 10), (20, -5)] as [(Int32, Int32)] {
            let rig = Rig(.success(ControlPlaneDouble.resourcesMonitoringConfiguration(datapoints: datapoints, intervalSeconds: seconds)))
            let error = await #expect(throws: ResourcesMonitorFailure.self) { try await rig.monitor.run(on: rig.session) }
            #expect(error?.description.contains("unusable") == true)
        }
        var files = Rig.host
        files.files["/proc/stat"] = nil
        let broken = Rig(.success(ControlPlaneDouble.resourcesMonitoringConfiguration()), files: files)
        let error = await #expect(throws: ResourcesMonitorFailure.self) { try await broken.monitor.run(on: broken.session) }
        #expect(error?.description.hasPrefix("failed to create resources fetcher: get host info:") == true)
    }

    @Test func thePlanKeepsItsBounds() {
        var configuration = ControlPlaneDouble.resourcesMonitoringConfiguration(datapoints: 100_000, volumes: (0..<20).map { "/v\($0)" })
        var long = ResourcesMonitoring_GetResourcesMonitoringConfigurationResponse.Volume()
        long.enabled = true
        long.path = "/" + String(repeating: "x", count: 2000)
        configuration.volumes.insert(long, at: 0)
        let plan = ResourcesMonitorPlan(configuration)
        #expect(plan != nil)
        #expect(plan?.window == ResourcesMonitorPlan.maxWindow)
        #expect(plan?.volumes == (0..<16).map { "/v\($0)" })
        #expect(plan?.trimmed.count == 6)  // 1 + 1 + 4
        #expect(plan?.interval == .seconds(10))
        #expect(ResourcesFetcher.goInt64(.nan) == .min && ResourcesFetcher.goInt64(1e19) == .min && ResourcesFetcher.goInt64(-3.7) == -3)
    }

    @Test func theWindowIsAFIFO() {
        var window = ResourcesMonitorWindow(capacity: 2)
        let point = { (second: Int64) in ResourcesDatapoint(collectedAt: Google_Protobuf_Timestamp(seconds: second, nanos: 0)) }
        #expect(window.append(point(1)) == nil)
        #expect(window.append(point(2))?.datapoints.map(\.collectedAt.seconds) == [1, 2])
        #expect(window.append(point(3))?.datapoints.map(\.collectedAt.seconds) == [2, 3])
        #expect(window.datapoints.count == 2)
    }
}
