import AgentCore
import Metrics
import Synchronization
import Logging

extension MCPServerManager {
    /// Follows one session: a `tools/list_changed` lists the server again; the session's end
    /// marks the server failed (its tools withdrawn from the catalog) and schedules a retry.
    func monitor(_ name: String, _ session: MCPClientSession, generation: UInt64) async {
        let started = ContinuousClock.now
        var reason = "the session ended"
        for await event in session.events {
            switch event {
            case .toolsChanged:
                guard isCurrent(name, generation) else { return }
                await list(name)
                publish()
            case .ended(let why):
                reason = why
            }
        }
        guard !Task.isCancelled else { return }
        let policy = configuration.restart
        let plan = state.withLock { s -> (UInt64, Duration, String)? in
            guard !s.closed, var server = s.servers[name], server.generation == generation else { return nil }
            if ContinuousClock.now - started >= policy.stable { server.failures = 0 }
            server.failures += 1
            server.session = nil
            server.tools = nil
            server.state = .restarting
            server.error = s.redactor.scrub("server exited: \(reason)", server: name)
            let id = s.generation()
            server.retry = id
            s.servers[name] = server
            return (id, policy.delay(afterFailures: server.failures, unit: random()), server.error)
        }
        guard let (id, delay, error) = plan else { return }
        logger.warning("mcp server session ended", metadata: ["mcp_server": "\(name)", "error": "\(error)", "retry_in": "\(delay)"])
        publish()
        await retry(name, id: id, after: delay)
    }

    /// Waits `delay`, then connects the server again unless a reload or another retry took
    /// over meanwhile.
    func retry(_ name: String, id: UInt64, after delay: Duration) async {
        guard (try? await Task.sleep(for: delay)) != nil else { return }
        guard let (config, attempt) = state.withLock({ s -> (MCPServerConfig, UInt64)? in
            guard !s.closed, var server = s.servers[name], server.retry == id, server.session == nil, server.attempt == nil else {
                return nil
            }
            let attempt = s.generation()
            server.attempt = attempt
            s.servers[name] = server
            return (server.desired, attempt)
        }) else { return }
        await attemptConnect(config, attempt: attempt, isRetry: true)
    }

    /// Whether `generation` is still the server's session.
    func isCurrent(_ name: String, _ generation: UInt64) -> Bool {
        state.withLock { $0.servers[name]?.generation == generation }
    }

    /// Lists one server's tools and records them (or why the listing failed). One listing
    /// runs per session: asked while one is in flight, it is done once more after it (so a
    /// server that never answers `tools/list` holds one task, however often it is asked).
    func list(_ name: String) async {
        guard let (session, generation) = state.withLock({ s -> (MCPClientSession, UInt64)? in
            guard var server = s.servers[name], let session = server.session else { return nil }
            if server.listing == server.generation {
                server.listAgain = true
                s.servers[name] = server
                return nil
            }
            server.listing = server.generation
            server.listAgain = false
            s.servers[name] = server
            return (session, server.generation)
        }) else { return }
        while await listOnce(name, session, generation: generation) {
            publish()
        }
    }

    /// One listing of `session`; true when another was asked for meanwhile (and is due).
    private func listOnce(_ name: String, _ session: MCPClientSession, generation: UInt64) async -> Bool {
        let outcome: Result<[ContextTool], MCPError>
        do throws(MCPError) {
            outcome = .success(try await session.listTools())
        } catch {
            outcome = .failure(error)
        }
        var dropped: [String] = []
        let tools = outcome.map { listed -> [ContextTool] in
            var kept: [ContextTool] = []
            for tool in listed {
                var reduced = tool
                reduced.inputSchema = MCPSchemaReduction.reduce(tool.inputSchema)
                if let schema = reduced.inputSchema, schema.encoded.count > MCPSchemaReduction.maxSchemaBytes {
                    dropped.append(tool.name)
                    continue
                }
                kept.append(reduced)
            }
            return kept.sorted { bytewisePrecedes($0.name, $1.name) }
        }
        for tool in dropped {
            logger.warning("mcp tool left out: its input schema is larger than \(MCPSchemaReduction.maxSchemaBytes) bytes", metadata: [
                "mcp_server": "\(name)", "tool": "\(tool)",
            ])
        }
        return state.withLock { s -> Bool in
            guard var server = s.servers[name], server.generation == generation else { return false }
            let again = server.listAgain
            server.listAgain = false
            if !again { server.listing = nil }
            defer { s.servers[name] = server }
            switch tools {
            case .success(let tools):
                server.tools = tools
                server.state = .connected
                if server.error.hasPrefix("tools/list") { server.error = "" }
            case .failure(let error):
                server.tools = nil
                server.state = .listFailed
                server.error = s.redactor.scrub(error.message, server: name)
            }
            return again
        }
    }

    /// Publishes the catalog: a server is connected when its session is up and listed.
    func publish() {
        let (entries, states) = state.withLock { s -> ([MCPCatalogEntry], [MCPServerState]) in
            guard !s.closed, s.ready else { return ([], []) }
            let entries = s.servers.values.compactMap { server -> MCPCatalogEntry? in
                if server.session != nil, let tools = server.tools {
                    return MCPCatalogEntry(name: server.desired.name, connected: true, tools: tools)
                }
                // A server making its first connection is not in the catalog yet.
                if server.state == .connecting, server.session == nil, server.error.isEmpty { return nil }
                let error = !server.error.isEmpty ? server.error : server.session != nil ? "listing its tools" : "failed to connect"
                return MCPCatalogEntry(name: server.desired.name, connected: false, error: error)
            }
            return (entries, s.servers.values.map(\.state))
        }
        catalog.publish(entries)
        metrics.servers(states)
    }
}
