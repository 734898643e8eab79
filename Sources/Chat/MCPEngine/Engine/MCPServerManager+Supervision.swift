import AgentCore
import Metrics
import Synchronization
import Logging

extension MCPServerManager {
    /// Follows one session: a `tools/list_changed` lists the server again (at most once a
    /// second); the session's end marks the server failed (its tools withdrawn) and schedules a retry.
    func monitor(_ name: String, _ session: MCPClientSession, generation: UInt64) async {
        let started = ContinuousClock.now
        var reason = "the session ended"
        for await event in session.events {
            switch event {
            case .toolsChanged:
                guard isCurrent(name, generation), await waitForListInterval(name), isCurrent(name, generation) else { return }
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
        guard
            let (config, attempt) = state.withLock({ s -> (MCPServerConfig, UInt64)? in
                guard !s.closed, var server = s.servers[name], server.retry == id, server.session == nil, server.attempt == nil else {
                    return nil
                }
                let attempt = s.generation()
                server.attempt = attempt
                s.servers[name] = server
                return (server.desired, attempt)
            })
        else { return }
        await attemptConnect(config, attempt: attempt, isRetry: true)
    }

    /// Whether `generation` is still the server's session.
    func isCurrent(_ name: String, _ generation: UInt64) -> Bool {
        state.withLock { $0.servers[name]?.generation == generation }
    }

    /// Lists one server's tools and records them (or why the listing failed). One listing
    /// runs per session: asked while one is in flight, it is done once more after it (so a
    /// server that never answers `tools/list` holds one task, however often it is asked).
    /// The pending one starts ``listInterval`` after the previous start at the earliest.
    func list(_ name: String) async {
        guard
            let (session, generation) = state.withLock({ s -> (MCPClientSession, UInt64)? in
                guard var server = s.servers[name], let session = server.session else { return nil }
                if server.listing == server.generation {
                    server.listAgain = true
                    s.servers[name] = server
                    return nil
                }
                server.listing = server.generation
                server.listAgain = false
                server.listStarted = .now
                s.servers[name] = server
                return (session, server.generation)
            })
        else { return }
        while await listOnce(name, session, generation: generation) {
            publish()
            guard await waitForListInterval(name),
                state.withLock({ s in
                    guard s.servers[name]?.generation == generation else { return false }
                    s.servers[name]?.listStarted = .now
                    return true
                })
            else {
                state.withLock { s in if s.servers[name]?.listing == generation { s.servers[name]?.listing = nil } }
                return
            }
        }
    }

    /// Sleeps until ``listInterval`` after the server's last listing started; false when cancelled.
    func waitForListInterval(_ name: String) async -> Bool {
        guard let started = state.withLock({ $0.servers[name]?.listStarted }) else { return true }
        return (try? await Task.sleep(until: started + Self.listInterval, clock: .continuous)) != nil
    }

    /// One listing of `session`; true when another was asked for meanwhile (and is due).
    private func listOnce(_ name: String, _ session: MCPClientSession, generation: UInt64) async -> Bool {
        var toolBudget = MCPToolBudget()
        let outcome: Result<[ContextTool], MCPError>
        do throws(MCPError) {
            outcome = .success(try await session.listTools(budget: &toolBudget))
        } catch {
            outcome = .failure(error)
        }
        // Sorted by name, each with whether the listing cut its description.
        let listing = outcome.map { tools in
            zip(tools, toolBudget.cuts.cutAtListing).sorted { bytewisePrecedes($0.0.name, $1.0.name) }
        }
        var cuts = toolBudget.cuts
        if case .success(let sorted) = listing { cuts.cutAtListing = sorted.map(\.1) }
        let (again, warn) = state.withLock { s -> (Bool, Bool) in
            // A listing that ends after its session did (the session's end keeps the
            // generation until the retry) must not mark the restarting server listed or failed.
            guard var server = s.servers[name], server.generation == generation, server.session != nil else { return (false, false) }
            let again = server.listAgain
            server.listAgain = false
            if !again { server.listing = nil }
            defer { s.servers[name] = server }
            switch listing {
            case .success(let sorted):
                // Said once per change of what is cut, not at every list_changed.
                let warn = cuts.summary != nil && (server.cuts.cutAtListing != cuts.cutAtListing || server.cuts.leftOut != cuts.leftOut)
                server.tools = sorted.map(\.0)
                server.cuts = cuts
                server.state = .connected
                if server.error.hasPrefix("tools/list") { server.error = "" }
                return (again, warn)
            case .failure(let error):
                server.tools = nil
                server.state = .listFailed
                server.error = s.redactor.scrub(error.message, server: name)
                return (again, false)
            }
        }
        if warn, let summary = cuts.summary {
            logger.warning("mcp tools cut to the catalog's bounds: \(summary)", metadata: ["mcp_server": "\(name)"])
        }
        return again
    }

    /// Publishes the catalog: a server is connected when its session is up and listed; the
    /// descriptions are cut to ``MCPToolBudget/maxCatalogDescriptionBytes`` in all, servers in name order.
    func publish() {
        let (entries, states, newlyCut) = state.withLock { s -> ([MCPCatalogEntry], [MCPServerState], [String]) in
            guard !s.closed, s.ready else { return ([], [], []) }
            let servers = s.servers.values.sorted { bytewisePrecedes($0.desired.name, $1.desired.name) }
            var entries = servers.compactMap { server -> MCPCatalogEntry? in
                if server.session != nil, let tools = server.tools {
                    return MCPCatalogEntry(name: server.desired.name, connected: true, tools: tools)
                }
                // A server making its first connection is not in the catalog yet.
                if server.state == .connecting, server.session == nil, server.error.isEmpty { return nil }
                let error = !server.error.isEmpty ? server.error : server.session != nil ? "listing its tools" : "failed to connect"
                return MCPCatalogEntry(name: server.desired.name, connected: false, error: error)
            }
            let cut = MCPToolBudget.fitCatalog(&entries) { s.servers[$0]?.cuts.cutAtListing ?? [] }
            var newlyCut: [String] = []
            for server in servers where server.cuts.cutInCatalog != cut[server.desired.name] ?? 0 {
                let name = server.desired.name
                s.servers[name]?.cuts.cutInCatalog = cut[name] ?? 0
                if cut[name] != nil { newlyCut.append("\(goQuote(name)): \(cut[name] ?? 0)") }
            }
            return (entries, servers.map(\.state), newlyCut)
        }
        if !newlyCut.isEmpty {
            logger.warning(
                "mcp tool descriptions cut to the catalog's \(MCPToolBudget.maxCatalogDescriptionBytes) bytes: \(newlyCut.joined(separator: ", "))")
        }
        catalog.publish(entries)
        metrics.servers(states)
    }
}

extension MCPServerManager {
    /// The least time from one listing's start to a list_changed's (or a pending) listing's.
    static let listInterval = Duration.seconds(1)
}

extension MCPServerManager.Server {
    /// What its status row reports as cut: nothing while it has no listing.
    var shownCuts: MCPToolCuts { tools == nil ? MCPToolCuts() : cuts }
}
