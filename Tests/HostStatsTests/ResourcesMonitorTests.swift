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

    /// A monitor on `clock` over a host with 8 GiB (6 available) and a disk at `/` only
    /// (or `statfs`), with its ticks and finished volume reads counted.
    final class Rig: Sendable {
        let clock = ManualClock()
        let log = CapturedLog()
        let ticks = Mutex(0)
        let session: RecordingSession
        let files: MemoryFileSystem
        let statfs: @Sendable (String) -> Result<DiskUsage, DiskError>
        let reads: VolumeReads

        init(
            _ configuration: Result<Configuration, UpwardStreamError>, files: MemoryFileSystem = Rig.host,
            statfs: @escaping @Sendable (String) -> Result<DiskUsage, DiskError> = Rig.rootOnly, reads: VolumeReads = VolumeReads()
        ) {
            session = RecordingSession(configuration)
            self.files = files
            self.statfs = statfs
            self.reads = reads
        }

        static let rootOnly: @Sendable (String) -> Result<DiskUsage, DiskError> = { path in
            path == "/" ? .success(DiskUsage(blocks: 1000, freeBlocks: 300, blockSize: 4096)) : .failure(DiskError(errno: ENOENT))
        }

        static var host: MemoryFileSystem {
            MemoryFileSystem(files: [
                "/proc/stat": "cpu 1 2 3 4\n", "/proc/cpuinfo": "processor : 0\n",
                "/proc/meminfo": "MemTotal: 8388608 kB\nMemAvailable: 6291456 kB\n", "/proc/1/cgroup": "0::/init.scope\n",
            ])
        }

        static let disk = ResourcesDatapoint.Usage(total: 4_096_000, used: 2_867_200)

        var monitor: ResourcesMonitor<ManualClock> {
            let (clock, files, statfs) = (clock, files, statfs)
            return ResourcesMonitor(
                clock: clock,
                now: {
                    self.ticks.withLock { $0 += 1 }
                    return Google_Protobuf_Timestamp(seconds: 1_700_000_000 + clock.now.offset.components.seconds, nanos: 0)
                },
                makeStatter: { () throws(StatError) in try HostStatter(fileSystem: files, wait: { _ in }, diskUsage: statfs) },
                volumeReads: reads, logger: log.logger)
        }

        /// Starts the monitor and waits for its first sleep.
        func start() async throws -> Task<Void, any Error> {
            let (monitor, session) = (monitor, session)
            let task = Task { try await monitor.run(on: session) }
            #expect(await eventually { clock.sleeping == 1 }, "\(log.text)")
            return task
        }

        /// Moves the clock one interval and waits until that tick is done: its volumes read
        /// (while it waits for them, the monitor sleeps on the clock until the next tick is
        /// due) and the monitor asleep again.
        func tick(_ interval: Duration = .seconds(10)) async {
            let before = ticks.withLock { $0 }
            let read = reads.finished
            clock.advance(by: interval)
            #expect(
                await eventually { ticks.withLock { $0 } == before + 1 && reads.finished == read + 1 && clock.sleeping == 1 },
                "\(log.text)")
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

    // MARK: A volume whose statfs does not return

    /// Volumes `/` and `/stuck` (whose `statfs` blocks until released), memory, a push every
    /// tick; the volumes' calls on a pool of the test's own.
    static func stuckRig() -> (Rig, StuckStatfs) {
        let stuck = StuckStatfs("/stuck")
        let configuration = ControlPlaneDouble.resourcesMonitoringConfiguration(datapoints: 1, memory: true, volumes: ["/", "/stuck"])
        let pool = BlockingPool(name: "statfs-test", threads: 2, maxQueued: 16)
        return (Rig(.success(configuration), statfs: { stuck.statfs($0) }, reads: VolumeReads(pool: pool)), stuck)
    }

    /// The first tick: both volumes asked, `/` answered, `/stuck` blocked, and the tick
    /// waiting for it on the clock (until the next tick is due).
    static func stick(_ rig: Rig, _ stuck: StuckStatfs) async {
        rig.clock.advance(by: .seconds(10))
        #expect(
            await eventually { stuck.blocked == 1 && rig.reads.outstanding == ["/stuck"] && rig.clock.sleeping == 1 },
            "\(rig.log.text)")
        #expect(rig.session.pushes.isEmpty && rig.reads.finished == 0)
    }

    /// The next tick is due: the first tick stops waiting for `/stuck` (its datapoint goes
    /// without it), and the second tick runs.
    static func giveUpOnTheStuckVolume(_ rig: Rig) async {
        rig.clock.advance(by: .seconds(10))
        #expect(await eventually { rig.reads.finished == 2 && rig.clock.sleeping == 1 }, "\(rig.log.text)")
    }

    /// Cancelled (its session dropped) while a `statfs` does not return, the monitor returns
    /// at once: the call stays blocked on the pool's thread, the session does not wait for it.
    @Test func theMonitorEndsWhenCancelledWhileAStatfsIsStuck() async throws {
        let (rig, stuck) = Self.stuckRig()
        defer { stuck.release() }
        let task = try await rig.start()
        await Self.stick(rig, stuck)
        let ended = TestFlag()
        Task {
            _ = await task.result
            ended.set()
        }
        task.cancel()
        #expect(await eventually { ended.isSet }, "\(rig.log.text)")
        #expect(stuck.blocked == 1 && rig.reads.outstanding == ["/stuck"], "the call is still blocked, on its own thread")
        #expect(rig.session.pushes.isEmpty)
        #expect(stuck.calls("/stuck") == 1)
    }

    /// While `/stuck`'s call does not return, every tick reports `/` and memory, leaves
    /// `/stuck` out and logs it (as the reference does a volume it cannot read), and does
    /// not call `statfs` on it again: the first tick waits for it until the next is due,
    /// the later ones skip it at once.
    @Test func aStuckVolumeIsLeftOutAndNotAskedAgainWhileTheOthersAreReported() async throws {
        let (rig, stuck) = Self.stuckRig()
        defer { stuck.release() }
        let task = try await rig.start()
        defer { task.cancel() }
        await Self.stick(rig, stuck)
        await Self.giveUpOnTheStuckVolume(rig)
        await rig.tick()
        await rig.tick()

        let pushes = rig.session.pushes
        #expect(pushes.map { $0.datapoints.map(\.collectedAt.seconds) } == [[1_700_000_010], [1_700_000_020], [1_700_000_030], [1_700_000_040]])
        for push in pushes {
            let point = try #require(push.datapoints.first)
            #expect(point.hasMemory && point.volumes.map(\.volume) == ["/"])
        }
        #expect(stuck.calls("/stuck") == 1 && stuck.calls("/") == 4)
        #expect(stuck.blocked == 1 && rig.reads.outstanding == ["/stuck"])
        let failures = rig.log.all.filter { $0.level == .error && $0.message == "failed to fetch volume" && $0.metadata["volume"] == "/stuck" }
        #expect(failures.count == 4, "\(rig.log.text)")
        #expect(failures.first?.metadata["error"]?.hasPrefix("statfs did not answer within") == true, "\(rig.log.text)")
        #expect(failures.dropFirst().allSatisfy { $0.metadata["error"]?.hasPrefix("an earlier statfs has not returned") == true }, "\(rig.log.text)")
    }

    /// Once its stuck call returns (its late answer is dropped), the volume is asked again
    /// at the next tick and reported as before.
    @Test func aVolumeIsReadAgainOnceItsStuckCallReturns() async throws {
        let (rig, stuck) = Self.stuckRig()
        defer { stuck.release() }
        let task = try await rig.start()
        defer { task.cancel() }
        await Self.stick(rig, stuck)
        await Self.giveUpOnTheStuckVolume(rig)
        stuck.release()
        #expect(await eventually { rig.reads.outstanding.isEmpty && stuck.blocked == 0 }, "the stuck call returned")
        #expect(rig.session.pushes.count == 2, "its late answer makes no datapoint")

        await rig.tick()
        #expect(stuck.calls("/stuck") == 2)
        let pushes = rig.session.pushes
        #expect(pushes.count == 3)
        #expect(pushes.prefix(2).allSatisfy { $0.datapoints.first?.volumes.map(\.volume) == ["/"] })
        let point = try #require(pushes.last?.datapoints.first)
        #expect(point.volumes.map(\.volume) == ["/", "/stuck"])
        #expect(point.volumes.map { [$0.total, $0.used] } == [[Rig.disk.total, Rig.disk.used], [Rig.disk.total, Rig.disk.used]])
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
