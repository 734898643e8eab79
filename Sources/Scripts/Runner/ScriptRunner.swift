import AgentCore
import CoreMetrics
import AgentProto
import FoundationEssentials
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Runs the manifest's scripts and reports their outcomes:
///
/// - **Start**: with the first manifest of the process, STARTING, then every `run_on_start`
///   script at once (never serially: `coder exp sync` pairs would deadlock); when all have
///   ended, READY, or START_TIMEOUT / START_ERROR from the first failure to complete. Later
///   manifests (reconnects) never run or schedule anything again.
/// - **Cron**: each script's schedule starts after the start phase, whatever its outcome;
///   runs may overlap, up to ``maxOverlappingRuns`` per script (further ticks are skipped
///   and counted).
/// - **Stop**: in the shutdown's `scripts` phase (the agent socket and process API still
///   serve), every `run_on_stop` script at once, each cut at its timeout or the stop limit;
///   then OFF, SHUTDOWN_TIMEOUT or SHUTDOWN_ERROR; then cron stops.
/// - **On demand**: `POST /api/v0/scripts/{id}/run` runs one script again.
///
/// Every run is reported with `ScriptCompleted`, including setup failures (a missing shell,
/// an unwritable log path), which also reach the script's log source as a line.
final class ScriptRunner: Sendable {
    static let maxOverlappingRuns = 4
    /// Runs remembered per script for the status route.
    static let runsKept = 10

    struct Environment: Sendable {
        var agentEnvironment: [String: String]
        var agentToken: String?
        var agentSocketPath: String?
        /// oom_score_adj and nice for scripts, as for the process API's children.
        var priority: ProcessPriority = .unchanged
        /// The layers every command gets; the runner names its bin directory there.
        var command = CommandEnvironment()
        /// The latest manifest, whose variables, secrets and token each run gets (the
        /// scripts themselves come from the first).
        var latestManifest: (any ManifestSource)?
    }

    private struct Entry: Sendable {
        var script: ManifestScript
        var schedule: CronSchedule?
        var cronError: String?
        var runs: [ScriptRunRecord] = []
        var runCount = 0
        var running = 0
        /// Runs admitted (cron, on demand) whose task has not started them yet: counted with
        /// ``running`` against ``maxOverlappingRuns``, so a burst cannot pass the check first.
        var reserved = 0
        var logPath = ""
    }

    private struct Running: Sendable {
        var index: Int
        var stage: ScriptStage
        var process: ScriptProcess
    }

    private struct State {
        var manifest: AgentManifest?
        var entries: [Entry] = []
        var running: [UInt64: Running] = [:]
        var nextRun: UInt64 = 0
        var shuttingDown = false
        var stopped = false
        var cron: [Task<Void, Never>] = []
        /// Tasks waiting for every run to end.
        var idleWaiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    let configuration: ScriptsOptions.Configuration
    let environment: Environment
    let uploads: ScriptUploads
    let lifecycle: any LifecycleReporter
    let clock: ShutdownClock?
    let metrics: ScriptsMetrics
    let logger: Logger

    var binDirectory: String { configuration.scriptDataDirectory + "/coder-script-data/bin" }
    var dataRoot: String { configuration.scriptDataDirectory + "/coder-script-data" }

    init(
        configuration: ScriptsOptions.Configuration, environment: Environment, uploads: ScriptUploads,
        lifecycle: any LifecycleReporter, clock: ShutdownClock?, metrics: ScriptsMetrics, logger: Logger
    ) {
        self.configuration = configuration
        self.environment = environment
        self.uploads = uploads
        self.lifecycle = lifecycle
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
        environment.command.setBinDirectory(configuration.scriptDataDirectory + "/coder-script-data/bin")
    }

    // MARK: Start phase

    /// Takes the first manifest (later ones are ignored) and runs the start phase, then
    /// starts cron. Returns when the start phase has ended.
    func start(with manifest: AgentManifest) async {
        let first = state.withLock { s -> Bool in
            guard s.manifest == nil, !s.shuttingDown else { return false }
            s.manifest = manifest
            s.entries = manifest.scripts.map { Entry(script: $0) }
            return true
        }
        guard first else { return }
        prepare(manifest)
        lifecycle.report(.starting)
        let began = ContinuousClock.now
        let indices = state.withLock { s in s.entries.indices.filter { s.entries[$0].script.runOnStart } }
        let failure = await runPhase(indices, stage: .start)
        let seconds = Double((ContinuousClock.now - began) / .milliseconds(1)) / 1000
        metrics.startupDuration(seconds, success: failure == nil)
        if !state.withLock({ $0.shuttingDown }) {
            let outcome: AgentLifecycleState = failure == nil ? .ready : (failure!.status == .timedOut ? .startTimeout : .startError)
            lifecycle.report(outcome)
            logger.info("start scripts finished", metadata: ["outcome": "\(outcome)", "seconds": "\(seconds)"])
        }
        startCron()
    }

    /// Directories, the `coder` link, cron schedules and the shutdown allowance.
    private func prepare(_ manifest: AgentManifest) {
        do {
            try ScriptSetup.makeDirectories(binDirectory)
            if let link = ScriptSetup.linkCoder(binDirectory: binDirectory, agentPath: environment.agentEnvironment["PATH"]) {
                logger.info("linked coder to the agent for `coder exp sync` in scripts", metadata: ["path": "\(link)"])
            }
        } catch {
            logger.warning("script bin dir unavailable", metadata: ["error": "\(error)"])
        }
        let user = UserAccount.current(environment: environment.agentEnvironment)
        state.withLock { s in
            for index in s.entries.indices {
                let script = s.entries[index].script
                s.entries[index].logPath = ScriptSetup.logPath(
                    script.logPath, logSourceID: script.logSourceID, logDirectory: configuration.logDirectory,
                    home: user.home, environment: environment.agentEnvironment)
                guard !script.cron.isEmpty else { continue }
                do {
                    let schedule = try CronSchedule(parsing: script.cron)
                    s.entries[index].schedule = schedule
                    if let warning = schedule.warning {
                        logger.warning("\(warning)", metadata: ["script": "\(UUIDText.format(script.id))"])
                        uploads.note(warning, sourceID: script.logSourceID, level: LogRecord.levelWarn)
                    }
                } catch {
                    // One bad schedule disables that script's cron only (the reference then
                    // never runs any script at all).
                    s.entries[index].cronError = "\(error)"
                    logger.warning("script cron rejected", metadata: ["script": "\(UUIDText.format(script.id))", "error": "\(error)"])
                    uploads.note("cron \"\(script.cron)\" rejected: \(error)", sourceID: script.logSourceID)
                }
            }
        }
        let stopLimits = manifest.scripts.filter(\.runOnStop).map { stopTimeout($0) }
        if let longest = stopLimits.max() {
            clock?.allow(longest + ScriptProcess.waitDelay + .seconds(2))
        }
    }

    /// A stop script's effective timeout: its own, at most the stop limit.
    func stopTimeout(_ script: ManifestScript) -> Duration {
        script.timeout > .zero ? min(script.timeout, configuration.stopScriptsLimit) : configuration.stopScriptsLimit
    }

    /// Runs `indices` at once and waits for all; the first failure to complete, if any.
    private func runPhase(_ indices: [Int], stage: ScriptStage) async -> ScriptExit? {
        await withTaskGroup(of: ScriptExit?.self) { group in
            for index in indices { group.addTask { await self.execute(index, stage: stage) } }
            var first: ScriptExit?
            for await exit in group where first == nil {
                if let exit, exit.status != .ok { first = exit }
            }
            return first
        }
    }

    // MARK: Cron

    private func startCron() {
        state.withLock { s in
            // A start phase that ended because shutdown began schedules nothing.
            guard !s.stopped, !s.shuttingDown else { return }
            for index in s.entries.indices {
                guard let schedule = s.entries[index].schedule else { continue }
                s.cron.append(Task { await self.cronLoop(index, schedule: schedule) })
            }
        }
    }

    private func cronLoop(_ index: Int, schedule: CronSchedule) async {
        while !Task.isCancelled {
            guard let next = schedule.next(after: Date()) else { return }
            let wait = next.timeIntervalSinceNow
            if wait > 0 {
                do { try await Task.sleep(for: .milliseconds(Int64((wait * 1000).rounded(.up)))) } catch { return }
            }
            // The wall clock may lag the sleep by a little: never run before the tick.
            while Date() < next, !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
            if Task.isCancelled { return }
            let busy = state.withLock { s -> Bool in
                guard s.entries.indices.contains(index), s.entries[index].running + s.entries[index].reserved < Self.maxOverlappingRuns
                else { return true }
                s.entries[index].reserved += 1
                return false
            }
            if busy {
                metrics.cronSkipped.increment()
                continue
            }
            Task { _ = await self.execute(index, stage: .cron, reserved: true) }
        }
    }

    // MARK: Shutdown

    /// Graceful shutdown has begun.
    var isShuttingDown: Bool { state.withLock { $0.shuttingDown } }

    /// Graceful shutdown begins: start-phase and on-demand runs are cancelled (SIGHUP to
    /// their groups); cron goes on until the stop scripts have ended.
    func beginShutdown() {
        let cancelled = state.withLock { s -> [ScriptProcess] in
            s.shuttingDown = true
            return s.running.values.filter { $0.stage == .start || $0.stage == .onDemand }.map(\.process)
        }
        for process in cancelled { process.cancel() }
    }

    /// The shutdown's `scripts` phase: every `run_on_stop` script, then the final lifecycle
    /// state, then cron stops and the remaining runs end. Without a manifest nothing runs
    /// and the session reports OFF.
    func runStopScripts() async {
        beginShutdown()
        let indices = state.withLock { s -> [Int]? in
            guard s.manifest != nil else { return nil }
            return s.entries.indices.filter { s.entries[$0].script.runOnStop }
        }
        if let indices {
            let failure = await runPhase(indices, stage: .stop)
            let outcome: AgentLifecycleState = failure == nil ? .off : (failure!.status == .timedOut ? .shutdownTimeout : .shutdownError)
            lifecycle.report(outcome)
            if !indices.isEmpty { logger.info("stop scripts finished", metadata: ["outcome": "\(outcome)"]) }
        }
        await stop()
    }

    /// Stops cron and cancels every run still going; returns when all have ended.
    func stop() async {
        let (cron, processes) = state.withLock { s -> ([Task<Void, Never>], [ScriptProcess]) in
            s.stopped = true
            s.shuttingDown = true
            defer { s.cron.removeAll() }
            return (s.cron, s.running.values.map(\.process))
        }
        for task in cron { task.cancel() }
        for process in processes { process.cancel() }
        for task in cron { await task.value }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.running.isEmpty { return true }
                s.idleWaiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// SIGKILL to every run's group at once (the shutdown watchdog's last resort).
    func terminateNow() {
        let pids = state.withLock { s in s.running.values.map(\.process.pid) }
        for pid in pids where pid > 0 { kill(-pid, SIGKILL) }
    }

    // MARK: On demand

    enum RunRequestError: Error, Equatable {
        case unknownScript
        case notReady
        case shuttingDown
        case busy
    }

    /// Starts one run of the script with `id` now (reported as CRON); returns its run number.
    func runNow(id: [UInt8]) throws(RunRequestError) -> Int {
        let result = state.withLock { s -> Result<Int, RunRequestError> in
            guard s.manifest != nil else { return .failure(.notReady) }
            guard !s.shuttingDown else { return .failure(.shuttingDown) }
            guard let index = s.entries.firstIndex(where: { $0.script.id == id }) else { return .failure(.unknownScript) }
            guard s.entries[index].running + s.entries[index].reserved < Self.maxOverlappingRuns else { return .failure(.busy) }
            s.entries[index].reserved += 1
            return .success(index)
        }
        let index = try result.get()
        let number = state.withLock { $0.entries[index].runCount + 1 }
        Task { _ = await self.execute(index, stage: .onDemand, reserved: true) }
        return number
    }

    // MARK: Status

    func status() -> ScriptsStatus {
        state.withLock { s in
            ScriptsStatus(
                lifecycle: lifecycle.currentLifecycle.description, manifestReceived: s.manifest != nil,
                scripts: s.entries.map { entry in
                    ScriptStatus(
                        id: UUIDText.format(entry.script.id), logSourceID: UUIDText.format(entry.script.logSourceID),
                        displayName: entry.script.displayName.isEmpty ? nil : entry.script.displayName,
                        logPath: entry.logPath, runOnStart: entry.script.runOnStart, runOnStop: entry.script.runOnStop,
                        startBlocksLogin: entry.script.startBlocksLogin,
                        cron: entry.script.cron.isEmpty ? nil : entry.script.cron,
                        cronNext: s.stopped ? nil : entry.schedule?.next(after: Date()).map(RFC3339.format),
                        cronError: entry.cronError, cronWarning: entry.schedule?.warning,
                        timeoutSeconds: Double(entry.script.timeout / .milliseconds(1)) / 1000,
                        running: entry.running, runs: entry.runs)
                })
        }
    }

    // MARK: One run

    /// What every command started for `manifest` needs (scripts and metadata commands).
    func commandContext(_ manifest: AgentManifest) -> ScriptCommand.Context {
        ScriptCommand.Context(
            agentEnvironment: environment.agentEnvironment, manifest: environment.latestManifest?.currentManifest ?? manifest,
            command: environment.command, manifestDirectory: manifest.directory,
            agentToken: environment.agentToken, agentSocketPath: environment.agentSocketPath,
            binDirectory: binDirectory, dataRoot: dataRoot)
    }

    /// Runs the script at `index` once and reports it; nil when it did not run (the runner
    /// stopped). Stop-stage runs use ``stopTimeout(_:)``.
    /// `reserved`: the run was admitted with a reservation (``Entry/reserved``), given back here.
    private func execute(_ index: Int, stage: ScriptStage, reserved: Bool = false) async -> ScriptExit? {
        let process = ScriptProcess()
        guard
            let (script, manifest, runID, logPath) = state.withLock({ s -> (ManifestScript, AgentManifest, UInt64, String)? in
                if reserved, s.entries.indices.contains(index) { s.entries[index].reserved = max(0, s.entries[index].reserved - 1) }
                guard let manifest = s.manifest, !s.stopped else { return nil }
                if stage != .stop && stage != .cron && s.shuttingDown { return nil }
                s.nextRun += 1
                s.entries[index].running += 1
                s.running[s.nextRun] = Running(index: index, stage: stage, process: process)
                return (s.entries[index].script, manifest, s.nextRun, s.entries[index].logPath)
            })
        else { return nil }
        metrics.running.record(state.withLock { $0.running.count })
        let timeout = stage == .stop ? stopTimeout(script) : script.timeout
        let exit: ScriptExit
        do throws(ScriptCommand.SetupError) {
            let context = commandContext(manifest)
            let dataDirectory = try ScriptSetup.dataDirectory(root: dataRoot, logSourceID: script.logSourceID)
            let file = try ScriptSetup.openLog(logPath)
            let command: ScriptCommand
            do {
                command = try ScriptCommand.make(script: script.script, context: context, dataDirectory: dataDirectory)
            } catch {
                let line = "\(error.description)\n"
                _ = line.withCString { write(file, $0, strlen($0)) }
                close(file)
                throw error
            }
            let output = ScriptLogOutput(file: file, sourceID: script.logSourceID, uploads: uploads, metrics: metrics)
            exit = await process.run(command, timeout: timeout, priority: environment.priority, handler: output)
            if exit.startFailed, let error = exit.error {
                uploads.note("\(logPath) script: \(error)", sourceID: script.logSourceID)
            }
        } catch {
            // A setup failure reaches the dashboard as a line on the script's source and a
            // report (the reference sends neither: coder/coder #28217).
            let now = Date()
            uploads.note("script setup failed: \(error.description)", sourceID: script.logSourceID)
            exit = ScriptExit(status: .exitFailure, exitCode: 255, error: error.description, start: now, end: now)
        }
        finish(runID: runID, index: index, stage: stage, script: script, exit: exit)
        return exit
    }

    private func finish(runID: UInt64, index: Int, stage: ScriptStage, script: ManifestScript, exit: ScriptExit) {
        uploads.report(exit, scriptID: script.id, stage: Coder_Agent_V2_Timing.Stage(rawValue: stage.wire) ?? .cron)
        metrics.executed(success: exit.status == .ok)
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.running[runID] = nil
            s.entries[index].running -= 1
            s.entries[index].runCount += 1
            s.entries[index].runs.append(ScriptRunRecord(run: s.entries[index].runCount, stage: stage, exit: exit))
            if s.entries[index].runs.count > Self.runsKept { s.entries[index].runs.removeFirst() }
            metrics.running.record(s.running.count)
            guard s.running.isEmpty else { return [] }
            defer { s.idleWaiters.removeAll() }
            return s.idleWaiters
        }
        for waiter in waiters { waiter.resume() }
        var metadata: Logger.Metadata = [
            "script": "\(UUIDText.format(script.id))", "stage": "\(stage)", "exit_code": "\(exit.exitCode)",
        ]
        if let error = exit.error { metadata["error"] = "\(error)" }
        if exit.status == .ok { logger.debug("script finished", metadata: metadata) } else { logger.warning("script failed", metadata: metadata) }
    }
}
