import AgentCore
import AgentProto
import Logging
import SwiftProtobuf

#if canImport(Glibc)
import Glibc
#endif

/// The reference's resource monitor (Agent API 2.4) on each connected session: memory and
/// volumes read every interval into a window that, once full, is pushed whole every tick.
///
/// The volumes' `statfs` calls run on threads of their own (``VolumeReads``), never on
/// Swift's cooperative threads, and a tick waits for them at most until the next tick is
/// due: a dead network mount cannot hold a cooperative thread or the session's end (the
/// reference's `Start` only starts a ticker, so a stuck `statfs` there stalls one goroutine
/// and reconnects still work; here it holds one thread of the pool, and the session ends
/// when it is cancelled, whatever the call does).
public struct ResourcesMonitor<TickClock: Clock>: UpwardParticipant where TickClock.Duration == Duration {
    // Failed readings are logged and left out; a failed push is logged, the next tick retries.
    static var configurationRPC: String { DRPCMethodPath.agent("GetResourcesMonitoringConfiguration") }
    static var pushRPC: String { DRPCMethodPath.agent("PushResourcesMonitoringUsage") }
    /// A call unanswered this long fails (the configuration ends the monitor for the
    /// session; a push is tried again at the next tick).
    public static var callTimeout: Duration { .seconds(30) }
    /// Largest answer read: both answers are a few bytes.
    static var maxAnswerBytes: Int { 64 << 10 }

    let clock: TickClock
    let now: @Sendable () -> Google_Protobuf_Timestamp
    let makeStatter: @Sendable () throws(StatError) -> HostStatter
    /// The volumes' calls still outstanding, kept across sessions.
    let volumeReads: VolumeReads
    let logger: Logger

    public var name: String { "resources monitor" }

    /// `clock` paces the ticks (tests pass a manual one), `now` stamps the datapoints and
    /// `makeStatter` reads the figures for one session (the machine's by default; its
    /// `diskUsage` is the volumes' `statfs`).
    public init(
        clock: TickClock, now: @escaping @Sendable () -> Google_Protobuf_Timestamp = ResourcesMonitorClock.wallClock,
        makeStatter: @escaping @Sendable () throws(StatError) -> HostStatter = { () throws(StatError) in try HostStatter() },
        logger: Logger
    ) {
        self.init(clock: clock, now: now, makeStatter: makeStatter, volumeReads: VolumeReads(), logger: logger)
    }

    /// With the volumes' calls on `volumeReads` (tests give it a pool of its own).
    init(
        clock: TickClock, now: @escaping @Sendable () -> Google_Protobuf_Timestamp,
        makeStatter: @escaping @Sendable () throws(StatError) -> HostStatter, volumeReads: VolumeReads, logger: Logger
    ) {
        self.clock = clock
        self.now = now
        self.makeStatter = makeStatter
        self.volumeReads = volumeReads
        self.logger = logger
    }

    public func run(on session: any UpwardSession) async throws {
        let configuration = try await fetchConfiguration(session)
        guard let plan = ResourcesMonitorPlan(configuration) else {
            let settings = "interval \(configuration.config.collectionIntervalSeconds) s, \(configuration.config.numDatapoints) datapoints"
            throw ResourcesMonitorFailure("resources monitoring configuration unusable (\(settings))")
        }
        for cut in plan.trimmed { logger.warning("resources monitoring bounded", metadata: ["what": "\(cut)"]) }
        let fetcher: ResourcesFetcher
        do {
            fetcher = try ResourcesFetcher(statter: try makeStatter())
        } catch {
            throw ResourcesMonitorFailure("failed to create resources fetcher: \(error)")
        }
        var window = ResourcesMonitorWindow(capacity: plan.window)
        var deadline = clock.now.advanced(by: plan.interval)
        while true {
            try await clock.sleep(until: deadline, tolerance: nil)
            // Ticks missed while one ran are dropped, as Go's ticker drops them.
            let reached = clock.now
            while deadline <= reached { deadline = deadline.advanced(by: plan.interval) }
            let datapoint = await collect(plan, fetcher)
            try Task.checkCancellation()
            guard let push = window.append(datapoint) else { continue }
            do {
                _ = try await call(session, Self.pushRPC, try push.serializedBytes())
            } catch {
                if Task.isCancelled { return }
                logger.error("failed to push resources monitoring usage", metadata: ["error": "\(error)"])
            }
        }
    }

    /// The configuration, asked again after a failure (1 s, doubling up to
    /// ``maxConfigurationRetry``) while the session lasts: the reference tears the whole
    /// connection down instead; without either, one failed call would end monitoring, and
    /// the memory and volume notifications coderd derives from it, until the next session.
    /// A control plane without the RPC, or a session that ended, ends the monitor at once.
    func fetchConfiguration(_ session: any UpwardSession) async throws -> ResourcesMonitoring_GetResourcesMonitoringConfigurationResponse {
        let request = try ResourcesMonitoring_GetResourcesMonitoringConfigurationRequest().serializedBytes() as [UInt8]
        var retry = Backoff(initial: .seconds(1), maximum: Self.maxConfigurationRetry, jitter: .none)
        while true {
            do {
                return try .init(serializedBytes: try await call(session, Self.configurationRPC, request))
            } catch {
                let terminal: Bool
                switch (error as? UpwardStreamError)?.kind {
                case .unsupported, .sessionEnded, .cancelled: terminal = true
                default: terminal = Task.isCancelled || error is CancellationError
                }
                if terminal { throw ResourcesMonitorFailure("failed to get resources monitoring configuration: \(error)") }
                let wait = retry.failed()
                logger.warning(
                    "failed to get resources monitoring configuration; asking again", metadata: ["error": "\(error)", "in": "\(wait)"])
                try await clock.sleep(until: clock.now.advanced(by: wait), tolerance: nil)
            }
        }
    }

    /// The longest wait between two tries of the configuration.
    public static var maxConfigurationRetry: Duration { .seconds(60) }

    /// One tick's datapoint: memory when enabled, each enabled volume; what fails is logged.
    /// Memory is read here: `/proc` and the cgroup's files are made by the kernel on read
    /// and never wait on a device or a server. The volumes' `statfs` calls run on the pool,
    /// each given until the next tick is due (the interval): a slow volume is measured as
    /// late as the reference's ticker would wait for it without dropping a tick, and the
    /// next tick still starts on time.
    func collect(_ plan: ResourcesMonitorPlan, _ fetcher: ResourcesFetcher) async -> ResourcesDatapoint {
        var datapoint = ResourcesDatapoint(collectedAt: now())
        if plan.memory {
            switch fetcher.memory() {
            case .success(let usage): datapoint.memory = usage
            case .failure(let error): logger.error("failed to fetch memory", metadata: ["error": "\(error)"])
            }
        }
        let volumes = await volumeReads.read(plan.volumes, within: plan.interval, on: clock) { fetcher.volume($0) }
        for path in plan.volumes {
            switch volumes[path] ?? .failure(.busy) {
            case .success(let usage): datapoint.volumes.append(.init(path: path, usage: usage))
            case .failure(let error): logger.error("failed to fetch volume", metadata: ["error": "\(error)", "volume": "\(path)"])
            }
        }
        return datapoint
    }

    /// A unary call given up after ``callTimeout`` (its stream is reset).
    private func call(_ session: any UpwardSession, _ rpc: String, _ request: [UInt8]) async throws -> [UInt8] {
        try await withThrowingTaskGroup(of: [UInt8]?.self) { group in
            group.addTask { try await session.unary(rpc, request: request, maxMessageBytes: Self.maxAnswerBytes) }
            group.addTask {
                try await Task.sleep(for: Self.callTimeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let answer = try await group.next() ?? nil else {
                try Task.checkCancellation()
                throw ResourcesMonitorFailure("no answer within \(Self.callTimeout)")
            }
            return answer
        }
    }
}

/// Why the monitor stopped for a session, or a call failed.
public struct ResourcesMonitorFailure: Error, CustomStringConvertible, Sendable {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// The reference's fetcher: memory from the container's cgroup (the host's `MemTotal` as
/// the total when the cgroup has no limit) or the host, volumes by `statfs`, in bytes.
struct ResourcesFetcher: Sendable {
    let statter: HostStatter
    let containerized: Bool

    init(statter: HostStatter) throws(StatError) {
        self.statter = statter
        switch statter.isContainerized() {
        case .success(let containerized): self.containerized = containerized
        case .failure(let error): throw error.wrapped("check is containerized").wrapped("new resource fetcher")
        }
    }

    func memory() -> Result<ResourcesDatapoint.Usage, StatError> {
        var figure: StatResult
        if containerized {
            switch statter.containerMemory(.none) {
            case .failure(let error): return .failure(error.wrapped("fetch container memory"))
            case .success(nil): return .failure(StatError("memory total is nil - can not fetch memory"))
            case .success(let result?): figure = result
            }
            if figure.total == nil {
                switch statter.hostMemory(.none) {
                case .failure(let error): return .failure(error.wrapped("fetch host memory"))
                case .success(let host): figure.total = host.total
                }
            }
        } else {
            switch statter.hostMemory(.none) {
            case .failure(let error): return .failure(error.wrapped("fetch host memory"))
            case .success(let host): figure = host
            }
        }
        guard let total = figure.total else { return .failure(StatError("memory total is nil - can not fetch memory")) }
        return .success(.init(total: Self.goInt64(total), used: Self.goInt64(figure.used)))
    }

    func volume(_ path: String) -> Result<ResourcesDatapoint.Usage, DiskError> {
        statter.disk(.none, path: path).map { .init(total: Self.goInt64($0.total ?? 0), used: Self.goInt64($0.used)) }
    }

    /// Go's `int64(float64)` on amd64: NaN and values out of range give the smallest int64.
    static func goInt64(_ value: Double) -> Int64 {
        guard value.isFinite, value >= -9.223_372_036_854_775_808e18, value < 9.223_372_036_854_775_808e18 else { return .min }
        return Int64(value)
    }
}

/// The wall clock the datapoints are stamped with.
public enum ResourcesMonitorClock {
    @Sendable public static func wallClock() -> Google_Protobuf_Timestamp {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Google_Protobuf_Timestamp(seconds: Int64(time.tv_sec), nanos: Int32(time.tv_nsec))
    }
}

/// The resource monitor as a module: nothing but its participant on each upward session.
public struct ResourcesMonitoringModule: AgentModule {
    let monitor: ResourcesMonitor<ContinuousClock>

    public var name: String { "resources monitor" }

    public init(logger: Logger) {
        monitor = ResourcesMonitor(clock: ContinuousClock(), logger: logger)
    }

    public var upwardParticipants: [any UpwardParticipant] { [monitor] }
}
