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

/// Starting processes: the environment, the at-most-once tool-call starts, the spawn.
extension ProcessManager {
    /// The child's environment: the agent's own variables, the provider's, the
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
        let claimed = await toolCalls.claim(toolCall, digest: digest, ageMs: ageMs, newID: UUIDText.random()) {
            [self] decide in
            do throws(StartFailure) {
                return try await offLoop(decide)
            } catch {
                return .decided(.notRecorded(SystemCallError(call: "queue the claim", errno: EAGAIN)))
            }
        }
        switch claimed {
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
                let process =
                    try await start(
                        command: command, workdir: workdir, environment: environment, background: background, chat: chat,
                        options: options, id: id) as ManagedProcess
                toolCalls.settle(toolCall, started: true)
                return .started(process)
            } catch {
                // Withdrawing the claim appends a line: off the caller's thread too.
                let toolCalls = self.toolCalls
                do throws(StartFailure) {
                    try await offLoop { toolCalls.settle(toolCall, started: false) }
                } catch _ {
                    // The pool refused (full): the claim must be withdrawn all the same.
                    toolCalls.settle(toolCall, started: false)
                }
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

    /// Starts `sh -c command` in its own process group, with the layered environment.
    public func start(
        command: String,
        workdir: String?,
        environment: [String: String]?,
        background: Bool,
        chat: ChatIdentity?,
        options: StartOptions = StartOptions(),
        id: String = UUIDText.random()
    ) async throws(StartFailure) -> ManagedProcess {
        // Counted from its admission until ``spawnAndWatch`` registers it (``State/admit``).
        try state.withLock { s throws(StartFailure) in try s.admit(id, limit: configuration.maxRunning) }
        defer { state.withLock { $0.startEnded(id) } }

        var requested = environment
        if let terminal = options.terminal {
            var withTerm = environment ?? [:]
            withTerm["TERM"] = terminal.term ?? withTerm["TERM"] ?? StartOptions.defaultTerm
            requested = withTerm
        }
        let env = await childEnvironment(requested, chat: chat)
        // The directory is checked (a `stat`) with the rest of the blocking work.
        let candidate: String? =
            if let workdir, !workdir.isEmpty { nil } else {
                await configuration.environmentProvider.defaultDirectory()
            }
        let result = try await offLoop { [self] () -> Result<ManagedProcess, StartFailure> in
            let resolvedDir: String = if let workdir, !workdir.isEmpty { workdir } else { defaultDirectory(candidate) }
            return Result { () throws(StartFailure) in
                try spawnAndWatch(
                    command: command, resolvedDir: resolvedDir, environment: env, background: background, chat: chat,
                    options: options, id: id)
            }
        }
        let process = try result.get()
        ProcessMetrics.started.increment()
        ProcessMetrics.running.record(state.withLock { $0.runningCount })
        logger.debug("process started", metadata: ["id": "\(process.id)", "pid": "\(process.pid)"])
        return process
    }

    /// The blocking part of a start (where ``offLoop(_:)`` runs it: the caller's pool thread
    /// or ``startPool``): the spawn, the record, the watch.
    private func spawnAndWatch(
        command: String, resolvedDir: String, environment env: EnvironmentBlock, background: Bool, chat: ChatIdentity?,
        options: StartOptions, id: String
    ) throws(StartFailure) -> ManagedProcess {
        let child: SpawnedChild
        do {
            let request = SpawnRequest(
                command: command, workdir: resolvedDir, environment: env,
                priority: configuration.priority, childNofileSoft: configuration.childNofileSoft,
                input: options.spawnInput)
            let path = configuration.baseEnvironment["PATH"]
            // Registered in `OwnedChildren` by the spawn, so no scan takes it for an orphan.
            child = try ProcessSpawner.spawn(request, agentPath: path)
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
            background: background, chatID: chat?.id, ancestorChatIDs: chat?.ancestorIDs ?? [], pid: child.pid, budget: subscriberBudget,
            input: input, spoolMaker: spoolMaker, options: options
        ) { [weak self] exited in self?.noteExited(exited) }
        if spooling, let failure = processLog.started(ProcessRecord(process)) {
            process.noteRecordFailure(failure.description)
        }
        // Registered before the watcher sees the child, so its exit always finds it here.
        let closedMeanwhile = state.withLock { s -> Bool in
            s.register(process)
            return s.closed
        }
        guard let token = watcher.watch(pid: child.pid, pidfd: child.pidfd, pipefd: child.outputFD, sink: process) else {
            // The watcher stopped (shutdown) while this start was under way: nothing of it stays.
            state.withLock { _ = $0.processes.removeValue(forKey: process.id) }
            ProcessWatcher.discardShell(child.pid)
            input?.processExited()
            if process.retireSpool() != nil { remover.remove(id) }
            if spooling { processLog.forgot(id) }
            throw StartFailure.closed
        }
        process.reactorToken = token
        if closedMeanwhile {
            _ = watcher.signalGroup(token, SIGKILL)
            throw StartFailure.closed
        }
        return process
    }

    /// `candidate` (the manifest directory) if it is a directory, else `$HOME`, else ""
    /// (the agent's cwd). Blocking: a `stat`.
    func defaultDirectory(_ candidate: String?) -> String {
        if let dir = candidate, !dir.isEmpty {
            var isDir = false
            if FileManager.default.fileExists(atPath: dir, isDirectory: &isDir), isDir { return dir }
        }
        if let home = configuration.homeDirectory(), !home.isEmpty { return home }
        return ""
    }
}
