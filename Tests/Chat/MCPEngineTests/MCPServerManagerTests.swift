import AgentCore
import AgentTestSupport
import Foundation
import Synchronization
import Testing

@testable import MCPEngine

/// The engine with real Python MCP servers: loading `.mcp.json` after the gate, the catalog,
/// calls, crashes and restarts, hangs, list changes, differential reloads and cancellation
/// (MCPServerManagerRuleTests has what needs no MCP SDK server).
/// Serialized: each test starts Python SDK servers (about a CPU-second each to start); run
/// at once they would take both cores from the rest of the suite for a minute.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct MCPServerManagerTests {
    /// A working directory with an `.mcp.json`, an engine over it, and its run task.
    final class Harness: Sendable {
        let directory: String
        let catalog = MCPCatalog()
        let manager: MCPServerManager
        let task = Mutex<Task<Void, Never>?>(nil)

        init(
            servers: [String: [String: Any]]? = nil, raw: String? = nil, gate: MCPServerManager.Gate = .open,
            timeouts: MCPClientSession.Timeouts = .init(), maxCalls: Int = 64,
            restart: MCPRestartPolicy = MCPRestartPolicy(initial: .milliseconds(50), maximum: .milliseconds(400), stable: .seconds(60))
        ) throws {
            directory = NSTemporaryDirectory() + "mcp-engine-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            manager = MCPServerManager(
                configuration: .init(
                    configFiles: [".mcp.json"], clientVersion: "test", timeouts: timeouts, restart: restart,
                    timing: .init(stdinGrace: .milliseconds(500), termGrace: .milliseconds(500)), maxCallsInFlight: maxCalls),
                home: directory, directory: directory, environment: MCPTestServers.environment, agentToken: "secret-agent-token",
                manifest: ManifestStore(), gate: gate, catalog: catalog)
            if let raw { try write(raw) } else if let servers { try write(servers) }
        }

        func write(_ servers: [String: [String: Any]]) throws {
            let data = try JSONSerialization.data(withJSONObject: ["mcpServers": servers])
            try write(String(decoding: data, as: UTF8.self))
        }

        func write(_ text: String) throws {
            // Written aside and renamed, as editors save.
            let path = directory + "/.mcp.json"
            try text.write(toFile: path + ".tmp", atomically: false, encoding: .utf8)
            _ = rename(path + ".tmp", path)
        }

        func start() {
            let manager = self.manager
            task.withLock { $0 = Task { try? await manager.run() } }
        }

        func stop() async {
            let running = task.withLock { $0 }
            running?.cancel()
            await running?.value
            try? FileManager.default.removeItem(atPath: directory)
        }

        func server(_ name: String) -> MCPServerStatus? { manager.servers.first { $0.name == name } }
        func entry(_ name: String) -> MCPCatalogEntry? { catalog.entries.first { $0.name == name } }
    }

    static func python(_ args: [String] = []) -> [String: Any] {
        ["command": "python3", "args": ["\(MCPTestServers.directory)/mcp_test_server.py"] + args]
    }

    @Test func loadsServersPublishesTheCatalogAndCallsTools() async throws {
        let h = try Harness(servers: ["alpha": Self.python(), "bad__name": Self.python()])
        h.start()
        #expect(await eventually { h.entry("alpha")?.connected == true })
        let alpha = try #require(h.entry("alpha"))
        #expect(alpha.tools.map(\.name).contains("echo"))
        #expect(alpha.tools.map(\.name) == alpha.tools.map(\.name).sorted())
        // Schemas are reduced to type, properties and required.
        let echo = try #require(alpha.tools.first { $0.name == "echo" })
        guard case .object(let members)? = echo.inputSchema else { Issue.record("no schema"); return }
        #expect(Set(members.map(\.0)).isSubset(of: ["type", "properties", "required"]))
        #expect(echo.inputSchema?["required"] == .array([.string("text")]))
        // The bad entry costs only itself.
        #expect(h.server("bad__name") == nil)
        #expect(h.server("alpha")?.state == .connected)
        #expect(h.server("alpha")?.transport == "stdio")

        let result = try await h.manager.callTool("alpha__echo", arguments: .object([("text", .string("hi"))]))
        #expect(result.content == [MCPContentItem(type: "text", text: "hi")])
        let failed = try await h.manager.callTool("alpha__fail", arguments: nil)
        #expect(failed.isError)
        await #expect(throws: MCPCallFailure.unknownServer("nope")) { try await h.manager.callTool("nope__echo", arguments: nil) }
        await #expect(throws: MCPCallFailure.invalidName("alpha_echo")) { try await h.manager.callTool("alpha_echo", arguments: nil) }
        await #expect(throws: MCPCallFailure.invalidName("__echo")) { try await h.manager.callTool("__echo", arguments: nil) }
        await h.stop()
    }

    @Test func waitsForTheGateBeforeLoading() async throws {
        let phase = StartPhaseWatch(forwardingTo: NoLifecycleReporter())
        let h = try Harness(servers: ["alpha": Self.python()], gate: .afterStartPhase(phase))
        h.start()
        // Nothing loads while the gate is shut (the same engine loads at once when it opens).
        for _ in 0..<50 { await Task.yield() }
        #expect(h.manager.servers.isEmpty)
        #expect(!h.manager.isReady)
        phase.markEnded()
        #expect(await eventually { h.entry("alpha")?.connected == true })
        await h.stop()
    }

    @Test func aCrashedServerIsMarkedFailedAndRestarted() async throws {
        // The first retry comes 5 to 10 s after the crash: time to see the failed state even
        // on a loaded host, where polls can be late by seconds.
        let h = try Harness(servers: ["alpha": Self.python()], restart: MCPRestartPolicy(initial: .seconds(10), maximum: .seconds(10)))
        h.start()
        #expect(await eventually { h.entry("alpha")?.connected == true })
        let firstPID = try #require(h.server("alpha")?.pid)
        await #expect(throws: MCPCallFailure.self) { try await h.manager.callTool("alpha__crash", arguments: nil) }
        // Meanwhile its tools are withdrawn and calls say why, instead of stale tools and 502s.
        #expect(await eventually { h.entry("alpha")?.connected == false })
        #expect(h.entry("alpha")?.error.contains("server exited") == true)
        #expect(h.server("alpha")?.state == .restarting)
        // Restarted with a new process, counted.
        #expect(await eventually(timeout: .seconds(60)) { (h.server("alpha")?.restarts ?? 0) >= 1 && h.entry("alpha")?.connected == true })
        #expect(h.server("alpha")?.pid != firstPID)
        let result = try await h.manager.callTool("alpha__echo", arguments: .object([("text", .string("back"))]))
        #expect(result.content.first?.text == "back")
        await h.stop()
    }

    @Test func aServerThatNeverAnswersFailsItsConnectAndLeavesOthersServing() async throws {
        let h = try Harness(
            servers: [
                "alpha": Self.python(),
                "silent": ["command": "python3", "args": ["\(MCPTestServers.directory)/not_mcp.py", "silent"]],
                "missing": ["command": "no-such-mcp-server-command"],
            ],
            // The Python SDK's server takes over 2 s to start on a quiet 2-core host, and more
            // than 5 s beside the suite's other tests: the connect bound leaves it room.
            timeouts: .init(connect: .seconds(20), list: .seconds(10), call: .seconds(10)))
        h.start()
        #expect(await eventually(timeout: .seconds(60)) { h.entry("alpha")?.connected == true })
        #expect(await eventually(timeout: .seconds(60)) { h.entry("silent")?.error.contains("failed to connect: initialize: timed out") == true })
        #expect(h.entry("silent")?.connected == false)
        #expect(await eventually { h.entry("missing")?.error.contains("executable file not found") == true })
        #expect(h.server("missing")?.state == .restarting)
        await #expect(throws: MCPCallFailure.self) { try await h.manager.callTool("missing__x", arguments: nil) }
        let result = try await h.manager.callTool("alpha__echo", arguments: .object([("text", .string("ok"))]))
        #expect(result.content.first?.text == "ok")
        await h.stop()
    }

    @Test func aListChangeReachesTheCatalog() async throws {
        let h = try Harness(servers: ["alpha": Self.python()])
        h.start()
        #expect(await eventually { h.entry("alpha")?.connected == true })
        #expect(h.entry("alpha")?.tools.contains { $0.name == "late_tool" } == false)
        _ = try await h.manager.callTool("alpha__add_tool", arguments: .object([("name", .string("late_tool"))]))
        #expect(await eventually { h.entry("alpha")?.tools.contains { $0.name == "late_tool" } == true })
        await h.stop()
    }

    @Test func anEditReconnectsOnlyTheChangedServer() async throws {
        let h = try Harness(servers: ["alpha": Self.python(), "beta": Self.python()])
        h.start()
        #expect(await eventually { h.entry("alpha")?.connected == true && h.entry("beta")?.connected == true })
        let alphaPID = try #require(h.server("alpha")?.pid)
        let betaPID = try #require(h.server("beta")?.pid)
        try h.write(["alpha": Self.python(), "beta": Self.python(["--page-size", "2"]), "gamma": Self.python()])
        #expect(await eventually { h.entry("gamma")?.connected == true })
        #expect(await eventually { h.server("beta")?.pid != betaPID && h.entry("beta")?.connected == true })
        #expect(h.server("alpha")?.pid == alphaPID)
        #expect(await eventually { MCPTestServers.isGoneOrZombie(betaPID) })
        // Removing a server closes it.
        try h.write(["alpha": Self.python()])
        #expect(await eventually { h.server("beta") == nil && h.entry("gamma") == nil })
        #expect(h.server("alpha")?.pid == alphaPID)
        await h.stop()
        #expect(await eventually { MCPTestServers.isGoneOrZombie(alphaPID) })
    }

    @Test func aChangedServerThatFailsKeepsItsOldSession() async throws {
        let h = try Harness(servers: ["alpha": Self.python()])
        h.start()
        #expect(await eventually { h.entry("alpha")?.connected == true })
        let pid = try #require(h.server("alpha")?.pid)
        try h.write(["alpha": ["command": "no-such-mcp-server-command"]])
        #expect(await eventually { h.server("alpha")?.lastError.contains("previous session is kept") == true })
        #expect(h.server("alpha")?.pid == pid)
        #expect(h.entry("alpha")?.connected == true)
        await h.stop()
    }

    @Test func cancellingACallCancelsItOnTheServer() async throws {
        let markers = NSTemporaryDirectory() + "mcp-markers-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: markers, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: markers) }
        let h = try Harness(servers: ["alpha": Self.python(["--marker-dir", markers])], maxCalls: 1)
        h.start()
        #expect(await eventually { h.entry("alpha")?.connected == true })
        let manager = h.manager
        let call = Task { try await manager.callTool("alpha__wait_forever", arguments: nil) }
        #expect(await eventually { FileManager.default.fileExists(atPath: markers + "/started") })
        // The one call slot is taken.
        await #expect(throws: MCPCallFailure.busy(1)) { try await manager.callTool("alpha__echo", arguments: .object([("text", .string("x"))])) }
        call.cancel()
        await #expect(throws: MCPCallFailure.self) { try await call.value }
        #expect(await eventually(timeout: .seconds(90)) { FileManager.default.fileExists(atPath: markers + "/cancelled") })
        #expect(h.manager.callsInFlight == 0)
        await h.stop()
    }

    @Test func anInvalidFileLeavesNoServersAndRecoversWhenFixed() async throws {
        let h = try Harness(raw: "{not json")
        h.start()
        #expect(await eventually { h.manager.isReady })
        try h.write(["alpha": Self.python()])
        #expect(await eventually { h.entry("alpha")?.connected == true })
        // An unusable file keeps its last good servers (see MCPConfigReloadTests); an empty
        // one removes them.
        try h.write("[1,2]")
        #expect(await eventually { h.manager.servers.contains { $0.transport == "config" && $0.state == .invalid } })
        #expect(h.entry("alpha")?.connected == true)
        try h.write("{}")
        #expect(await eventually { h.manager.servers.isEmpty && h.catalog.entries.isEmpty })
        await h.stop()
    }
}
