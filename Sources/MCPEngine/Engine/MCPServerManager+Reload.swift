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

    /// Loads the files again when they changed (size, modification time, existence) and
    /// brings the sessions in line with them; then lists every session's tools and
    /// publishes the catalog.
    func reload() async {
        let files = resolvedFiles()
        watch(files)
        let prints = MCPConfigSet.fingerprints(files)
        let unchanged = state.withLock { $0.files == files && $0.fingerprints == prints }
        if unchanged { return }
        let environment = self.environment
        var set = MCPConfigSet.load(files, environment: { environment[$0] })
        if set.servers.count > Self.maxServers {
            set.problems.append("more than \(Self.maxServers) MCP servers declared; the rest are left out")
            set.servers.removeSubrange(Self.maxServers...)
        }
        for problem in set.problems { logger.warning("\(problem)") }
        let redactor = ContextRedactor(secrets: agentToken.map { [$0] } ?? []).adding(servers: set.servers)

        // The plan, made under the lock: which servers go, which connect.
        let (removed, toConnect) = state.withLock { s -> ([MCPClientSession], [MCPServerConfig]) in
            s.files = files
            s.fingerprints = prints
            s.redactor = redactor
            let wanted = Dictionary(uniqueKeysWithValues: set.servers.map { ($0.name, $0) })
            var removed: [MCPClientSession] = []
            for (name, server) in s.servers where wanted[name] == nil {
                if let session = server.session { removed.append(session) }
                s.servers[name] = nil
            }
            var toConnect: [MCPServerConfig] = []
            for config in set.servers {
                if var server = s.servers[config.name] {
                    guard server.desired != config || (server.session == nil && server.running != config) else {
                        continue
                    }
                    server.desired = config
                    server.retry = nil
                    s.servers[config.name] = server
                } else {
                    s.servers[config.name] = Server(desired: config, generation: s.generation(), state: .connecting)
                }
                toConnect.append(config)
            }
            return (removed, toConnect)
        }
        if !removed.isEmpty { await Self.close(removed) }

        let directory = workingDirectory
        let serverEnvironment = self.serverEnvironment
        await withDiscardingTaskGroup { group in
            for config in toConnect {
                group.addTask {
                    let outcome = await self.connect(config, environment: serverEnvironment, directory: directory)
                    await self.settle(config, outcome, isRetry: false)
                }
            }
        }
        // Every live session is listed again after a reload.
        let live = state.withLock { s in s.servers.compactMap { $0.value.session == nil ? nil : $0.key } }
        await withDiscardingTaskGroup { group in
            for name in live { group.addTask { await self.list(name) } }
        }
        publish()
    }

    /// Starts and initializes a session for `config`.
    func connect(_ config: MCPServerConfig, environment: [String: String], directory: String) async -> Result<MCPClientSession, MCPError> {
        let logger = self.logger
        do throws(MCPError) {
            let endpoint = try MCPEndpoint.make(config, environment: environment, directory: directory)
            let session = try await MCPClientSession.connect(
                endpoint, serverName: config.name, clientVersion: configuration.clientVersion, timeouts: configuration.timeouts,
                timing: configuration.timing, owner: children
            ) { server, line in
                logger.info("\(line)", metadata: ["mcp_server": "\(server)"])
            }
            return .success(session)
        } catch {
            return .failure(error)
        }
    }

    /// Installs a new session, or records why there is none (keeping a working session of
    /// an earlier entry) and schedules a retry.
    func settle(_ config: MCPServerConfig, _ outcome: Result<MCPClientSession, MCPError>, isRetry: Bool) async {
        enum Next { case drop(MCPClientSession), installed(UInt64, MCPClientSession, old: MCPClientSession?), retry(UInt64, Duration), nothing }
        let next = state.withLock { s -> Next in
            guard !s.closed, var server = s.servers[config.name], server.desired == config else {
                if case .success(let session) = outcome { return .drop(session) }
                return .nothing
            }
            switch outcome {
            case .success(let session):
                let old = server.session
                if isRetry || server.running != nil { server.restarts += 1 }
                server.session = session
                server.running = config
                server.generation = s.generation()
                server.state = .connected
                server.error = ""
                server.retry = nil
                s.servers[config.name] = server
                return .installed(server.generation, session, old: old)
            case .failure(let error):
                let text = s.redactor.scrub("failed to connect: \(error.message)")
                server.failures += 1
                if server.session != nil {
                    // A changed entry that does not connect: the old session serves on.
                    server.error = s.redactor.scrub("reconnect failed, the previous session is kept: \(error.message)")
                    server.desired = config
                    s.servers[config.name] = server
                    return .nothing
                }
                server.error = text
                server.state = .restarting
                server.tools = nil
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
            logger.info("mcp server connected", metadata: [
                "mcp_server": "\(config.name)", "protocol_version": "\(session.protocolVersion)",
            ])
            spawn { await self.monitor(config.name, session, generation: generation) }
            if let old { await old.close() }
        case .retry(let id, let delay):
            if case .failure(let error) = outcome {
                logger.warning("mcp server did not connect", metadata: [
                    "mcp_server": "\(config.name)", "error": "\(state.withLock { $0.redactor.scrub(error.message) })",
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
