import AgentCore
import AgentHTTP
import CoreMetrics
import FoundationEssentials
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Owns every process started through the API: starting, listing, waiting, signalling,
/// reaping, and terminating their process groups at shutdown.
///
/// It is a `Service`: `run()` starts the reactor thread (which reads output and sees
/// exits), reaps exited processes on a timer until graceful shutdown, then terminates every
/// process group (SIGTERM, a grace period, SIGKILL). Starts made before `run()` are
/// watched once it begins.
public final class ProcessManager: Service, Sendable {
    public struct Configuration: Sendable {
        /// Layer 2 of the environment and the default directory (spec §4).
        public var environmentProvider: any AgentEnvironmentProvider
        /// Layer 1: the agent's own environment.
        public var baseEnvironment: [String: String]
        /// Layer 3: what the agent's running sessions add (the desktop's `DISPLAY`), over
        /// the provider's variables and under the request's.
        public var sessionEnvironment: SessionEnvironment?
        /// `$HOME` fallback for the default directory (injectable for tests).
        public var homeDirectory: @Sendable () -> String?
        public var priority: ProcessPriority
        /// RLIMIT_NOFILE soft limit restored in children (the agent raises its own).
        public var childNofileSoft: Int?
        /// Most processes running at once; further starts fail with 500.
        public var maxRunning: Int = 1024
        /// Most exited processes kept for `/output` and `/list`; the oldest go first.
        public var maxRetainedExited: Int = 256
        /// Exited processes older than this are reaped (strictly greater, as the reference).
        public var reapAfter: Duration = .seconds(300)
        /// How often the timer reaps (the reference reaps only on `/list`).
        public var reapInterval: Duration = .seconds(30)
        /// Time between SIGTERM and SIGKILL at shutdown.
        public var shutdownGrace: Duration = .seconds(5)
        /// Longest `wait=true` (spec: 5 minutes).
        public var maxWait: Duration = .seconds(300)
        /// Entries returned by `/list`.
        public var listLimit: Int = 10
        /// Where the working directories of chats' processes are recorded when they exit
        /// (the git watcher finds a chat's repositories there).
        public var chatPaths: ChatPaths?
        /// Make the agent a child subreaper: orphaned descendants are re-parented to it,
        /// reaped, and terminated at shutdown. Only for a process whose children all come
        /// from process managers (the daemon): any other child would be taken for an orphan.
        public var adoptOrphans = false
        /// Stream subscribers across all processes.
        public var maxSubscribers: Int = 256
        /// Output queued for all stream subscribers together.
        public var maxSubscriberBytes: Int = 64 << 20
        /// A stream subscriber that accepts no data for this long is disconnected.
        public var subscriberStallTimeout: Duration = .seconds(30)
        /// Where processes' records, output spools and tool-call claims are kept
        /// (`<dir>/processes`), so they survive an agent restart; nil: a private temporary
        /// directory, removed at shutdown (nothing survives).
        public var stateDirectory: String?
        /// Bounds of the output spools (per process and in total).
        public var spoolLimits = OutputSpoolStore.Limits()
        /// Spool every process's output to disk (cursor reads, awaits from any offset,
        /// output across restarts). Off: only the head and tail in memory, as the reference.
        public var spoolOutput = true
        /// How long a stdin write or close may take from its arrival (its wait behind earlier
        /// writes included) when the child does not read.
        public var stdinWriteTimeout: Duration = .seconds(10)

        public init(
            environmentProvider: any AgentEnvironmentProvider = StaticEnvironmentProvider(),
            baseEnvironment: [String: String] = ProcessInfo.processInfo.environment,
            homeDirectory: (@Sendable () -> String?)? = nil,
            priority: ProcessPriority = .unchanged,
            childNofileSoft: Int? = nil
        ) {
            self.environmentProvider = environmentProvider
            self.baseEnvironment = baseEnvironment
            let home = baseEnvironment["HOME"]
            self.homeDirectory = homeDirectory ?? { home }
            self.priority = priority
            self.childNofileSoft = childNofileSoft
        }
    }

    /// Why a start failed; the route answers each with 500 and a detail.
    public enum StartFailure: Error, Equatable {
        /// Shutdown has begun.
        case closed
        case tooManyProcesses(limit: Int)
        /// The shell could not be started (the OS error, spelled out).
        case spawn(String)
    }

    /// Why a signal was not sent.
    public enum SignalFailure: Error, Equatable {
        /// The process exited (409).
        case notRunning
        /// kill(2) failed otherwise (500).
        case failed(String)
    }

    /// A supported signal name (case-sensitive, as the reference).
    public enum SignalName: String, Sendable {
        case kill
        case terminate

        var number: Int32 { self == .kill ? SIGKILL : SIGTERM }
    }

    public let configuration: Configuration
    /// The bound on all stream subscribers together.
    public let subscriberBudget: SubscriberBudget
    private let logger: Logger
    private let reactor: ProcessReactor
    /// Every process's output on disk; nil when the spool directory could not be made (see
    /// ``spoolUnavailable``): the manager then runs as with spooling off.
    let spools: OutputSpoolStore?
    /// Why output is not spooled although spooling is on (the spool path is not a
    /// directory, or the disk refused it); shown by `GET /status`.
    public let spoolUnavailable: String?
    /// Tool calls' starts (at most once each).
    let toolCalls: ToolCallStarts
    /// Failed writes of the files that outlive the agent (counted, logged rate-limited).
    let failures: DurableFailures
    /// The directory the manager made for itself (no state directory given), removed at shutdown.
    private let privateDirectory: String?
    /// Awaits matching output now (bounded by ``maxAwaits``).
    let activeAwaits = Atomic<Int>(0)
    /// Processes' records on disk (with spooling on).
    private let processLog: ProcessLog
    /// Removes forgotten processes' spools off the lock.
    private let remover: SpoolRemover
    private let state = Mutex(State())
    /// Environments built for starts without variables of their own (``childEnvironment``).
    private let environments = Mutex(EnvironmentBlocks())

    private struct State {
        var processes: [String: ManagedProcess] = [:]
        /// Ids of exited processes in exit order (oldest first), from `exitedHead` on; it
        /// makes trimming and reaping O(1) per process instead of a scan per start.
        var exitedOrder: [String] = []
        var exitedHead = 0
        var closed = false
        var shutdownStarted = false

        var exitedCount: Int { exitedOrder.count - exitedHead }
        var runningCount: Int { processes.count - exitedCount }

        mutating func popOldestExited() -> String? {
            guard exitedHead < exitedOrder.count else { return nil }
            let id = exitedOrder[exitedHead]
            exitedHead += 1
            if exitedHead > 1024, exitedHead * 2 > exitedOrder.count {
                exitedOrder.removeFirst(exitedHead)
                exitedHead = 0
            }
            return id
        }
    }

    public init(configuration: Configuration, logger: Logger) throws {
        self.configuration = configuration
        self.subscriberBudget = SubscriberBudget(
            maxSubscribers: configuration.maxSubscribers, maxBytes: configuration.maxSubscriberBytes)
        self.logger = logger
        self.reactor = try ProcessReactor(adoptOrphans: configuration.adoptOrphans)
        let base: String
        if let directory = configuration.stateDirectory {
            base = directory + "/processes"
            privateDirectory = nil
        } else {
            base = try Self.makePrivateDirectory()
            privateDirectory = base
        }
        try Self.makeDirectory(base)
        let failures = DurableFailures(logger: logger)
        self.failures = failures
        do {
            spools = try OutputSpoolStore(directory: base + "/spool", limits: configuration.spoolLimits) { failures.report(.spool, $0) }
            spoolUnavailable = nil
        } catch {
            // The API is the product; durable output is a feature of it: run on without it.
            spools = nil
            spoolUnavailable = "\(error)"
            logger.warning("process output is not spooled: the spool directory is unusable", metadata: [
                "error": "\(error)", "path": "\(base)/spool",
            ])
        }
        toolCalls = ToolCallStarts(directory: base, failures: failures)
        processLog = ProcessLog(directory: base, failures: failures)
        remover = SpoolRemover(spools: spools)
        restore()
    }

    /// Output is spooled (and processes recorded): spooling is on and the spool directory usable.
    public var spooling: Bool { configuration.spoolOutput && spools != nil }

    private static func makeDirectory(_ path: String) throws {
        if mkdir(path, 0o700) != 0 && errno != EEXIST { throw SystemCallError(call: "mkdir \(path)", errno: errno) }
    }

    private static func makePrivateDirectory() throws -> String {
        let parent = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array((parent + "/agent-proc-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw SystemCallError(call: "mkdtemp", errno: errno)
        }
        return String(cString: made)
    }

    // MARK: Restore

    /// Takes up the processes an earlier agent left (their records and spools): exited ones
    /// as they ended, running ones as `lost`; the newest ``Configuration/maxRetainedExited``
    /// are kept, the rest (and anything unreadable) removed.
    private func restore() {
        let nowUnix = Int64(Date().timeIntervalSince1970)
        let records = Dictionary(processLog.restored.map { ($0.id, $0) }, uniquingKeysWith: { _, last in last })
        if let spools {
            // What cannot be a spool (links, files, stray directories) goes first, then the
            // spools without a record (of processes forgotten, or never recorded).
            let strays = spools.removeStrays()
            if !strays.removed.isEmpty || !strays.left.isEmpty {
                logger.info("stray entries in the spool directory", metadata: [
                    "removed": "\(strays.removed.count)", "left": "\(strays.left)",
                ])
            }
            for id in spools.storedIDs() where records[id] == nil { spools.remove(id: id) }
        }
        var restored: [ManagedProcess] = []
        for record in records.values {
            // A process that printed nothing has no spool.
            let spool = spools?.restore(id: record.id)
            restored.append(ManagedProcess(restored: record, spool: spool, budget: subscriberBudget, nowUnix: nowUnix))
        }
        restored.sort { ($0.exitInfo?.exitedAtUnix ?? 0, $0.startedAtUnix) < ($1.exitInfo?.exitedAtUnix ?? 0, $1.startedAtUnix) }
        let excess = max(0, restored.count - configuration.maxRetainedExited)
        for process in restored.prefix(excess) {
            spools?.remove(id: process.id)
            processLog.forgot(process.id)
        }
        let kept = restored.dropFirst(excess)
        state.withLock { s in
            for process in kept {
                s.processes[process.id] = process
                s.exitedOrder.append(process.id)
            }
        }
        if !kept.isEmpty {
            ProcessMetrics.restored.increment(by: kept.count)
            logger.info("restored processes of an earlier agent", metadata: [
                "count": "\(kept.count)", "lost": "\(kept.filter(\.lost).count)",
            ])
        }
    }

    // MARK: Start

    /// The child's environment (spec §4): the agent's own variables, the provider's, the
    /// running sessions' (``SessionEnvironment``: the desktop's `DISPLAY`), the request's,
    /// then `CODER_CHAT_ID`. A start without variables of its own reuses the block built
    /// for the same provider and session generations and chat: no merge, no comparison.
    private func childEnvironment(_ requested: [String: String]?, chat: ChatIdentity?) async -> EnvironmentBlock {
        let layer: AgentEnvironmentLayer
        do {
            layer = try await configuration.environmentProvider.agentEnvironmentLayer()
        } catch {
            logger.warning("agent environment unavailable; using the raw environment", metadata: ["error": "\(error)"])
            layer = AgentEnvironmentLayer(generation: nil, variables: [:])
        }
        let session = configuration.sessionEnvironment?.current ?? SessionEnvironment.Snapshot(generation: 0, variables: [:])
        let reusable = (requested ?? [:]).isEmpty ? layer.generation : nil
        if let generation = reusable,
           let block = environments.withLock({ $0.block(generation: generation, session: session.generation, chatID: chat?.id) })
        {
            return block
        }
        var env = configuration.baseEnvironment
        for (key, value) in layer.variables { env[key] = value }
        for (key, value) in session.variables { env[key] = value }
        for (key, value) in requested ?? [:] { env[key] = value }
        if let chat { env["CODER_CHAT_ID"] = chat.id }
        let block = EnvironmentBlock.cache.block(for: env)
        if let generation = reusable {
            environments.withLock { $0.store(block, generation: generation, session: session.generation, chatID: chat?.id) }
        }
        return block
    }

    /// What a start with tool-call headers did.
    public enum StartOnce: Sendable {
        /// The call's first start: the command runs.
        case started(ManagedProcess)
        /// A retry: the call ran before (in this agent or an earlier one) as `id`; its process
        /// when it is still retained, else how it ended if known.
        case attached(id: String, process: ManagedProcess?, exit: ExitStatus?)
        /// The same call with a different request (409).
        case mismatch
        /// The call is older than the agent's record of calls and may have run (409).
        case unknownBeforeHorizon
        /// The call's claim could not be written durably (the error): nothing ran (503).
        case notRecorded(String)
    }

    /// Starts at most once per tool call: a retry with the same `toolCall` and the same
    /// request answers with the first start's process (also after an agent restart).
    public func startOnce(
        command: String, workdir: String?, environment: [String: String]?, background: Bool,
        chat: ChatIdentity?, options: StartOptions, toolCall: ToolCallKey, ageMs: UInt64
    ) async throws(StartFailure) -> StartOnce {
        let digest = Self.requestDigest(command: command, workdir: workdir, environment: environment, background: background, options: options)
        switch await toolCalls.claim(toolCall, digest: digest, ageMs: ageMs, newID: UUID().uuidString.lowercased()) {
        case .mismatch:
            return .mismatch
        case .beforeHorizon:
            return .unknownBeforeHorizon
        case .notRecorded(let error):
            ProcessMetrics.startsUnclaimed.increment()
            return .notRecorded(error.description)
        case .existing(let entry):
            ProcessMetrics.startsReplayed.increment()
            let process = state.withLock { $0.processes[entry.id] }
            return .attached(id: entry.id, process: process, exit: entry.exit.map { ExitStatus(code: $0.code, signal: $0.signal) })
        case .run(let id):
            do {
                let process = try await start(
                    command: command, workdir: workdir, environment: environment, background: background, chat: chat,
                    options: options, id: id) as ManagedProcess
                toolCalls.settle(toolCall, started: true)
                return .started(process)
            } catch {
                toolCalls.settle(toolCall, started: false)
                throw error
            }
        }
    }

    /// SHA-256 over what a start asks for, in a fixed order (the environment sorted).
    static func requestDigest(
        command: String, workdir: String?, environment: [String: String]?, background: Bool, options: StartOptions
    ) -> String {
        var hasher = SHA256()
        func add(_ text: String) {
            var bytes = Array(text.utf8)
            var length = UInt64(bytes.count).bigEndian
            withUnsafeBytes(of: &length) { hasher.update($0) }
            bytes.withUnsafeMutableBytes { hasher.update(UnsafeRawBufferPointer($0)) }
        }
        add(command)
        add(workdir ?? "\u{0}none")
        for key in (environment ?? [:]).keys.sorted() {
            add(key)
            add(environment?[key] ?? "")
        }
        add(background ? "bg" : "fg")
        add(options.stdin ? "stdin" : "")
        if let terminal = options.terminal { add("pty \(terminal.rows)x\(terminal.cols) \(terminal.term ?? "")") }
        return SHA256.hexString(hasher.finalize())
    }

    /// Starts `sh -c command` in its own process group (spec §2.1, §4).
    public func start(
        command: String,
        workdir: String?,
        environment: [String: String]?,
        background: Bool,
        chat: ChatIdentity?,
        options: StartOptions = StartOptions(),
        id: String = UUID().uuidString.lowercased()
    ) async throws(StartFailure) -> ManagedProcess {
        let running = try state.withLock { s throws(StartFailure) -> Int in
            if s.closed { throw StartFailure.closed }
            return s.runningCount
        }
        if running >= configuration.maxRunning { throw StartFailure.tooManyProcesses(limit: configuration.maxRunning) }

        var requested = environment
        if let terminal = options.terminal {
            var withTerm = environment ?? [:]
            withTerm["TERM"] = terminal.term ?? withTerm["TERM"] ?? StartOptions.defaultTerm
            requested = withTerm
        }
        let env = await childEnvironment(requested, chat: chat)

        let resolvedDir: String
        if let workdir, !workdir.isEmpty {
            resolvedDir = workdir
        } else {
            resolvedDir = await defaultDirectory()
        }

        let child: SpawnedChild
        do {
            let request = SpawnRequest(
                command: command, workdir: resolvedDir, environment: env,
                priority: configuration.priority, childNofileSoft: configuration.childNofileSoft,
                input: options.spawnInput)
            let path = configuration.baseEnvironment["PATH"]
            child = try ProcessReactor.registeringShell { () throws(SpawnError) in
                try ProcessSpawner.spawn(request, agentPath: path)
            }
        } catch {
            throw StartFailure.spawn(error.description)
        }
        let input = child.inputFD >= 0 ? ProcessInput(fd: child.inputFD, kind: options.terminal == nil ? .pipe : .terminal) : nil
        // No spool (the disk refused a directory) still runs the command: only the offset
        // reads and the restart lose it.
        var spoolMaker: (@Sendable () -> OutputSpool?)?
        if spooling, let spools {
            spoolMaker = { [spools, logger] in
                do {
                    return try spools.create(id: id)
                } catch {
                    logger.warning("no output spool for a process", metadata: ["id": "\(id)", "error": "\(error)"])
                    return nil
                }
            }
        }
        let process = ManagedProcess(
            id: id, command: command, workdir: resolvedDir,
            background: background, chatID: chat?.id, pid: child.pid, budget: subscriberBudget,
            input: input, spoolMaker: spoolMaker, options: options
        ) { [weak self] exited in self?.noteExited(exited) }
        if spooling, let failure = processLog.started(ProcessRecord(process)) {
            process.noteRecordFailure(failure.description)
        }
        // Registered before the reactor sees the child, so its exit always finds it here.
        let closedMeanwhile = state.withLock { s -> Bool in
            s.processes[process.id] = process
            return s.closed
        }
        guard let token = reactor.watch(pid: child.pid, pidfd: child.pidfd, pipefd: child.outputFD, sink: process) else {
            // The reactor stopped (shutdown) while this start was under way: nothing of it stays.
            state.withLock { _ = $0.processes.removeValue(forKey: process.id) }
            ProcessReactor.discardShell(child.pid)
            input?.processExited()
            if process.retireSpool() != nil { remover.remove(id) }
            if spooling { processLog.forgot(id) }
            throw StartFailure.closed
        }
        process.reactorToken = token
        if closedMeanwhile {
            _ = reactor.signalGroup(token, SIGKILL)
            throw StartFailure.closed
        }
        ProcessMetrics.started.increment()
        ProcessMetrics.running.record(state.withLock { $0.runningCount })
        logger.debug("process started", metadata: ["id": "\(process.id)", "pid": "\(child.pid)"])
        return process
    }

    /// The manifest directory if it exists, else `$HOME`, else "" (the agent's cwd).
    public func defaultDirectory() async -> String {
        if let dir = await configuration.environmentProvider.defaultDirectory(), !dir.isEmpty {
            var isDir = false
            if FileManager.default.fileExists(atPath: dir, isDirectory: &isDir), isDir { return dir }
        }
        if let home = configuration.homeDirectory(), !home.isEmpty { return home }
        return ""
    }

    /// Called on the reactor thread when a process exits: queue it and keep at most
    /// `maxRetainedExited` exited processes (the oldest exits go first).
    private func noteExited(_ process: ManagedProcess) {
        ProcessMetrics.exited.increment()
        if let exit = process.exitInfo {
            let recorded = ProcessRecord.Exit(code: exit.status.code, signal: exit.status.signal, exitedAtUnix: exit.exitedAtUnix)
            if spooling { processLog.exited(process.id, recorded) }
            toolCalls.recordExit(id: process.id, recorded)
        }
        if let chat = process.chatID, let paths = configuration.chatPaths {
            // The directory it ran in; "" is the agent's own, a relative one is relative to it.
            let workdir = process.workdir
            let absolute = workdir.hasPrefix("/") ? workdir : FileManager.default.currentDirectoryPath + (workdir.isEmpty ? "" : "/" + workdir)
            paths.record(absolute, chat: chat)
        }
        state.withLock { s in
            guard s.processes[process.id] === process else { return }
            s.exitedOrder.append(process.id)
            ProcessMetrics.running.record(s.runningCount)
            while s.exitedCount > configuration.maxRetainedExited, let oldest = s.popOldestExited() {
                if let victim = s.processes[oldest] { forget(victim, in: &s) }
            }
        }
    }

    private func forget(_ process: ManagedProcess, in s: inout State) {
        s.processes[process.id] = nil
        if process.isOutputOpen, let token = process.reactorToken { reactor.closeOutput(token) }
        // The files go off this lock.
        if process.retireSpool() != nil { remover.remove(process.id) }
        // A restored process (pid 0) has a record even when this run spools nothing.
        if spooling || process.pid == 0 { processLog.forgot(process.id) }
    }

    // MARK: Query

    /// The process, unless unknown or owned by another chat (both look like 404).
    public func lookup(_ id: String, chat: ChatIdentity?) -> ManagedProcess? {
        guard let process = state.withLock({ $0.processes[id] }) else { return nil }
        return Self.visible(process, to: chat) ? process : nil
    }

    /// True when the id exists but belongs to another chat.
    public func isForeign(_ id: String, chat: ChatIdentity?) -> Bool {
        guard let process = state.withLock({ $0.processes[id] }) else { return false }
        return !Self.visible(process, to: chat)
    }

    /// A process with no chat is visible to all; a request with no chat sees everything.
    static func visible(_ process: ManagedProcess, to chat: ChatIdentity?) -> Bool {
        guard let owner = process.chatID, let chat else { return true }
        return owner == chat.id
    }

    /// Reap, filter by chat (exact match; chat-less processes hidden from chats), sort
    /// (running first, newest first), cap (spec §2.2).
    public func list(chat: ChatIdentity?) -> [ManagedProcess] {
        reap()
        let all = state.withLock { Array($0.processes.values) }
        let mine = all.filter { chat == nil || $0.chatID == chat?.id }
        let sorted = mine.map { ($0, $0.isRunning) }.sorted { a, b in
            if a.1 != b.1 { return a.1 }
            if a.0.startedAtUnix != b.0.startedAtUnix { return a.0.startedAtUnix > b.0.startedAtUnix }
            return a.0.startedAt > b.0.startedAt
        }
        return sorted.prefix(configuration.listLimit).map(\.0)
    }

    /// Deletes processes that exited more than `reapAfter` ago; returns how many.
    @discardableResult
    public func reap(now: ContinuousClock.Instant = .now) -> Int {
        state.withLock { s in
            var reaped = 0
            while s.exitedHead < s.exitedOrder.count {
                let id = s.exitedOrder[s.exitedHead]
                guard let process = s.processes[id], let exit = process.exitInfo else {
                    _ = s.popOldestExited()
                    continue
                }
                guard now - exit.exitedAt > configuration.reapAfter else { break }
                _ = s.popOldestExited()
                forget(process, in: &s)
                reaped += 1
            }
            return reaped
        }
    }

    /// True once shutdown has begun (streams then give stalled clients less time).
    public var isShuttingDown: Bool { state.withLock { $0.closed } }

    /// Number of processes retained (running and exited).
    public var count: Int { state.withLock { $0.processes.count } }

    // MARK: Wait and signal

    /// Returns when the process exits, `clientGone` reports, `maxWait` passes, or the
    /// task is cancelled, whichever is first. Never throws: the caller answers with a snapshot.
    /// Every registration it makes (exit, client, timer on `timerLoop`, the connection's
    /// loop: no task to create and cancel per request) is withdrawn when it returns.
    public func waitForExit(_ process: ManagedProcess, clientGone: any GoneSignal, timerLoop: any EventLoop) async {
        let signal = OneShotSignal()
        guard let waiterID = process.onExit({ signal.fire() }) else { return }
        defer { process.removeExitWaiter(waiterID) }
        let client = clientGone.whenGone { signal.fire() }
        defer { client.cancel() }
        let maxWait = configuration.maxWait
        let nanoseconds = maxWait.components.seconds * 1_000_000_000 + maxWait.components.attoseconds / 1_000_000_000
        let timer = timerLoop.scheduleTask(in: .nanoseconds(nanoseconds)) { signal.fire() }
        defer { timer.cancel() }
        await signal.wait()
    }

    /// Sends the signal to the whole process group, if the agent still owns it.
    public func signal(_ process: ManagedProcess, _ name: SignalName) throws(SignalFailure) {
        guard process.isRunning, let token = process.reactorToken else { throw SignalFailure.notRunning }
        let code = reactor.signalGroup(token, name.number)
        // ESRCH: the group is gone, the exit is simply not processed yet.
        if code == ESRCH { throw SignalFailure.notRunning }
        if code != 0 {
            throw SignalFailure.failed("kill process group \(process.pid): \(SystemCallError.message(code))")
        }
    }

    /// SIGKILL to every process group and adopted orphan the agent still owns, at once
    /// (the shutdown watchdog's last step). Safe from any thread.
    public func killOwnedGroupsNow() {
        reactor.killAllIfPossible()
    }

    // MARK: Lifecycle

    public func run() async throws {
        reactor.start()
        let interval = configuration.reapInterval
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do { try await Task.sleep(for: interval) } catch { break }
                self.reap()
            }
        }
        await shutdown()
    }

    /// Refuses new starts, then terminates every process group the agent still owns:
    /// SIGTERM, up to `shutdownGrace` for them to exit, SIGKILL for the rest, then at most
    /// ``killWait`` more. Groups of shells that already exited are signalled too while a
    /// member is left (so background grandchildren do not survive the agent), but never once
    /// their id may belong to someone else (see ``ProcessReactor``).
    public func shutdown() async {
        // Run detached from the caller's cancellation so the grace period really elapses.
        await Task { await self.terminateAll() }.value
    }

    private func terminateAll() async {
        let processes = state.withLock { s -> [ManagedProcess]? in
            s.closed = true
            guard !s.shutdownStarted else { return nil }
            s.shutdownStarted = true
            return Array(s.processes.values)
        }
        guard let processes else { return }
        let signalled = reactor.signalAll(SIGTERM)
        if signalled > 0 {
            logger.info("terminating process groups", metadata: ["count": "\(signalled)"])
        }
        if await !waitUntilQuiet(processes, within: configuration.shutdownGrace) {
            reactor.signalAll(SIGKILL)
            _ = await waitUntilQuiet(processes, within: Self.killWait)
        }
        await reactor.stop()
        await remover.flush()
        if let privateDirectory {
            for id in spools?.storedIDs() ?? [] { spools?.remove(id: id) }
            unlink(privateDirectory + "/" + ToolCallStarts.fileName)
            unlink(privateDirectory + "/" + ProcessLog.fileName)
            rmdir(privateDirectory + "/spool")
            rmdir(privateDirectory)
        }
    }

    /// After SIGKILL, how long the kernel gets to end the groups and close their pipes
    /// (a pipe still held then, by a process that left its group, is closed by us).
    static let killWait: Duration = .milliseconds(500)

    /// Polls (every 10 ms, bounded by `within`) until the agent owns no group or orphan and
    /// no pipe is open.
    private func waitUntilQuiet(_ processes: [ManagedProcess], within limit: Duration) async -> Bool {
        let deadline = ContinuousClock.now + limit
        func quiet() -> Bool {
            reactor.ownedCount == 0 && processes.allSatisfy { !$0.isRunning && !$0.isOutputOpen }
        }
        while ContinuousClock.now < deadline {
            if quiet() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return quiet()
    }
}

/// The environment blocks of recent starts without variables of their own, by provider
/// generation, session generation and chat; at most ``capacity`` (the most recently used first).
struct EnvironmentBlocks {
    static let capacity = 8
    private var entries: [(generation: UInt64, session: UInt64, chatID: String?, block: EnvironmentBlock)] = []

    mutating func block(generation: UInt64, session: UInt64 = 0, chatID: String?) -> EnvironmentBlock? {
        guard let index = entries.firstIndex(where: { $0.generation == generation && $0.session == session && $0.chatID == chatID }) else {
            return nil
        }
        let entry = entries.remove(at: index)
        entries.insert(entry, at: 0)
        return entry.block
    }

    mutating func store(_ block: EnvironmentBlock, generation: UInt64, session: UInt64 = 0, chatID: String?) {
        // Blocks of other generations are dropped: a start asks for the current ones.
        entries.removeAll { $0.generation != generation || $0.session != session || $0.chatID == chatID }
        entries.insert((generation, session, chatID, block), at: 0)
        if entries.count > Self.capacity { entries.removeLast(entries.count - Self.capacity) }
    }
}
