import AgentCore
import Metrics
import Synchronization
import Glibc
import Logging

extension MCPServerManager {
    /// The configured files as paths (AgentCore's ``ConfiguredPaths``, as the chat context
    /// resolves its lists), each once.
    func resolvedFiles() -> [String] {
        var seen = Set<String>()
        return ConfiguredPaths.resolve(configuration.configFiles, home: home, workingDirectory: workingDirectory)
            .filter { seen.insert($0).inserted }
    }

    /// Loads the files again when their fingerprints changed (or a missing file's grace
    /// ended) and brings the servers in line with them at once: removed servers are closed
    /// and new or changed ones connect, each on a task of its own that lists its tools and
    /// publishes when it is done; live sessions list their tools again. Nothing here waits
    /// for a server.
    func reload() async {
        let files = resolvedFiles()
        watch(files)
        let prints = MCPConfigSet.fingerprints(files)
        let now = ContinuousClock.now
        let (unchanged, memory) = state.withLock { s in
            let graceEnded = s.recheck.map { now >= $0 } ?? false
            return (s.files == files && s.fingerprints == prints && !graceEnded, s.fileMemory)
        }
        if unchanged { return }
        let environment = self.environment
        var set = MCPConfigSet.load(
            files, memory: memory, now: now, missingGrace: configuration.missingGrace, environment: { environment[$0] })
        if set.servers.count > Self.maxServers {
            set.problems.append("more than \(Self.maxServers) MCP servers declared; the rest are left out")
            set.servers.removeSubrange(Self.maxServers...)
        }
        for problem in set.problems { logger.warning("\(problem)") }
        // The session token too: under instance identity it is the connection's exchanged one.
        let tokens = Set([agentToken, manifest.currentManifest?.commandSecrets.sessionToken].compactMap { $0 })
        let redactor = ContextRedactor(secrets: Array(tokens)).adding(servers: set.servers)

        // The plan, made under the lock: which servers go, which connect, which list again.
        struct Plan {
            var removed: [MCPClientSession] = []
            var connect: [(MCPServerConfig, UInt64)] = []
            var list: [String] = []
            var recheck: ContinuousClock.Instant?
        }
        let plan = state.withLock { s -> Plan in
            var plan = Plan()
            s.files = files
            s.fingerprints = prints
            s.redactor = redactor
            s.fileMemory = set.memory
            s.fileProblems = set.fileProblems.map { problem in
                var scrubbed = problem
                scrubbed.message = redactor.scrub(problem.message)
                return scrubbed
            }
            if set.recheck != s.recheck { plan.recheck = set.recheck }
            s.recheck = set.recheck
            let wanted = Dictionary(uniqueKeysWithValues: set.servers.map { ($0.name, $0) })
            for (name, server) in s.servers where wanted[name] == nil {
                server.connectTask?.cancel()
                if let session = server.session { plan.removed.append(session) }
                s.servers[name] = nil
            }
            for config in set.servers {
                var server: Server
                if let existing = s.servers[config.name] {
                    server = existing
                    let stale = server.desired != config || (server.session == nil && server.running != config && server.attempt == nil)
                    guard stale else {
                        if server.session != nil { plan.list.append(config.name) }
                        continue
                    }
                    server.connectTask?.cancel()
                    server.connectTask = nil
                    server.desired = config
                    server.retry = nil
                } else {
                    server = Server(desired: config, generation: s.generation(), state: .connecting)
                }
                let attempt = s.generation()
                server.attempt = attempt
                s.servers[config.name] = server
                plan.connect.append((config, attempt))
            }
            return plan
        }
        if !plan.removed.isEmpty {
            let removed = plan.removed
            spawn { await Self.close(removed) }
        }
        for (config, attempt) in plan.connect {
            spawn { await self.attemptConnect(config, attempt: attempt, isRetry: false) }
        }
        // Every live session is listed again after a reload.
        for name in plan.list {
            spawn { await self.list(name) }
        }
        if let recheck = plan.recheck {
            // The load that ends a missing file's grace.
            spawn {
                guard (try? await Task.sleep(until: recheck, clock: .continuous)) != nil else { return }
                self.reloadSignal.notify()
            }
        }
        publish()
    }

    /// Connects `config` for connect `attempt` on a task of its own (so that removing the
    /// server or changing its entry cancels it), installs the outcome, lists the server's
    /// tools and publishes.
    func attemptConnect(_ config: MCPServerConfig, attempt: UInt64, isRetry: Bool) async {
        let environment = serverEnvironment
        let directory = workingDirectory
        let task = Task { await self.connect(config, environment: environment, directory: directory) }
        let registered = state.withLock { s -> Bool in
            guard !s.closed, var server = s.servers[config.name], server.attempt == attempt else { return false }
            server.connectTask = task
            s.servers[config.name] = server
            return true
        }
        if !registered { task.cancel() }
        let outcome = await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            task.cancel()
        }
        await settle(config, outcome, isRetry: isRetry, attempt: attempt)
        if case .success = outcome { await list(config.name) }
        publish()
    }

    /// Starts and initializes a session for `config`.
    func connect(_ config: MCPServerConfig, environment: [String: String], directory: String) async -> Result<MCPClientSession, MCPError> {
        let logger = self.logger
        do throws(MCPError) {
            let endpoint = try MCPEndpoint.make(config, environment: environment, directory: directory)
            let session = try await MCPClientSession.connect(
                endpoint, serverName: config.name, clientVersion: configuration.clientVersion, timeouts: configuration.timeouts,
                timing: configuration.timing, owner: children, budget: budget
            ) { server, line in
                logger.info("\(self.state.withLock { $0.redactor }.scrub(line, server: server))", metadata: ["mcp_server": "\(server)"])
            }
            return .success(session)
        } catch {
            return .failure(error)
        }
    }

    /// Installs a new session, or records why there is none (keeping a working session of
    /// an earlier entry) and schedules a retry. With an `attempt`, an outcome of a connect
    /// that was superseded (the entry changed, the server was removed) is dropped; without
    /// one, the outcome supersedes any connect in flight.
    func settle(_ config: MCPServerConfig, _ outcome: Result<MCPClientSession, MCPError>, isRetry: Bool, attempt: UInt64? = nil) async {
        enum Next { case drop(MCPClientSession), installed(UInt64, MCPClientSession, old: MCPClientSession?), retry(UInt64, Duration), nothing }
        let next = state.withLock { s -> Next in
            guard !s.closed, var server = s.servers[config.name], server.desired == config,
                attempt == nil || server.attempt == attempt
            else {
                if case .success(let session) = outcome { return .drop(session) }
                return .nothing
            }
            if attempt == nil { server.connectTask?.cancel() }
            server.attempt = nil
            server.connectTask = nil
            switch outcome {
            case .success(let session):
                let old = server.session
                if isRetry || server.running != nil { server.restarts += 1 }
                server.session = session
                server.running = config
                server.generation = s.generation()
                // Connected once its tools are listed; a replaced session's listing serves meanwhile.
                server.state = server.tools == nil ? .connecting : .connected
                server.error = ""
                server.retry = nil
                s.servers[config.name] = server
                return .installed(server.generation, session, old: old)
            case .failure(let error):
                let text = s.redactor.scrub("failed to connect: \(error.message)", server: config.name)
                server.failures += 1
                if server.session != nil {
                    // A changed entry that does not connect: the old session serves on.
                    server.error = s.redactor.scrub("reconnect failed, the previous session is kept: \(error.message)", server: config.name)
                    server.desired = config
                    s.servers[config.name] = server
                    return .nothing
                }
                server.error = text
                server.state = .restarting
                server.tools = nil
                // An entry no retry can fix (an unsupported transport) is reported once, not retried.
                if Self.isPermanent(error) { s.servers[config.name] = server; return .nothing }
                let retry = s.generation()
                server.retry = retry
                s.servers[config.name] = server
                return .retry(retry, configuration.restart.delay(afterFailures: server.failures, unit: random()))
            }
        }
        switch next {
        case .drop(let session):
            await session.close()
        case .installed(let generation, let session, let old):
            if isRetry { metrics.restarts.increment() }
            logger.info(
                "mcp server connected",
                metadata: [
                    "mcp_server": "\(config.name)", "protocol_version": "\(session.protocolVersion)",
                ])
            spawn { await self.monitor(config.name, session, generation: generation) }
            if let old { await old.close() }
        case .retry(let id, let delay):
            if case .failure(let error) = outcome {
                logger.warning(
                    "mcp server did not connect",
                    metadata: [
                        "mcp_server": "\(config.name)", "error": "\(state.withLock { $0.redactor.scrub(error.message, server: config.name) })",
                        "retry_in": "\(delay)",
                    ])
            }
            spawn { await self.retry(config.name, id: id, after: delay) }
        case .nothing:
            break
        }
    }

    /// Watches the files' directories (or their nearest existing ancestors, and a linked
    /// file's target directory too); events on the files' names, and creations and removals
    /// anywhere watched, ask for a reload.
    func watch(_ files: [String]) {
        var directories: [String] = []
        var names = Set<String>()
        for file in files {
            names.insert(Self.baseName(file))
            directories.append(Self.existingAncestor(of: Self.parent(of: file)))
            if let target = Self.linkTarget(file) {
                names.insert(Self.baseName(target))
                directories.append(Self.existingAncestor(of: Self.parent(of: target)))
            }
        }
        state.withLock { $0.watchedNames = names }
        watcher.watch(directories)
        // A watch that failed (inotify's limits reached) is said once and the files are
        // polled until a later watch succeeds.
        let problem = watcher.problem
        let before = state.withLock { s -> String? in
            defer { s.watchProblem = problem }
            return s.watchProblem
        }
        guard problem != before else { return }
        if let problem {
            logger.warning(
                "mcp config files are not watched; polling them",
                metadata: [
                    "error": "\(problem)", "interval": "\(configuration.pollInterval)",
                ])
            pollSignal.notify()
        } else {
            logger.info("mcp config files are watched again")
        }
    }

    static func parent(of path: String) -> String {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "." }
        let parent = String(path[..<slash])
        return parent.isEmpty ? "/" : parent
    }

    static func baseName(_ path: String) -> String {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return path }
        return String(path[path.utf8.index(after: slash)...])
    }

    /// `path` when it is a directory, else its nearest ancestor that is (at most 64 levels).
    static func existingAncestor(of path: String) -> String {
        var current = path
        for _ in 0..<64 {
            if FileInfo.following(path: current)?.kind == .directory { return current }
            if current == "/" || current == "." { return current }
            current = parent(of: current)
        }
        return "/"
    }

    /// Where a symbolic link points (resolved against its directory), or nil.
    static func linkTarget(_ path: String) -> String? {
        guard FileInfo.of(path: path)?.kind == .symbolicLink,
            let target = readSymbolicLink(path)
        else { return nil }
        return target.hasPrefix("/") ? target : parent(of: path) + "/" + target
    }

}
