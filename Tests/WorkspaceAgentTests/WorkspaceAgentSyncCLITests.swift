import AgentCore
import AgentRPC
import AgentSocket
import AgentTestSupport
import CAgentSpawn
import Foundation
import Logging
import ServiceLifecycle
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `workspace-agent exp sync` through the real binary against a real agent: the reference's
/// outputs, exit codes, and the startup-script pair of
/// the reference's documentation.
/// Five minutes a test: `goldenOutputs` runs the debug binary about twenty times, and beside
/// a loaded suite it took more than two minutes.
@Suite(.timeLimit(.minutes(5)))
struct WorkspaceAgentSyncCLITests {
    /// Runs `exp sync <arguments> --socket-path <path>`; stdout and stderr together.
    static func sync(_ arguments: [String], socket: String, outputPath: String? = nil) async -> (output: String, status: Int32) {
        await AgentDaemon.command(["exp", "sync"] + arguments + ["--socket-path", socket], outputPath: outputPath)
    }

    /// Until the CLI writing to `path` has said it waits (it found its dependency not ready).
    static func waiting(_ path: String) async -> Bool {
        await eventually(timeout: .seconds(60)) {
            ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").contains("is waiting for dependencies")
        }
    }

    /// An agent with its socket at a fresh path.
    static func withAgent(_ body: (String) async throws -> Void) async throws {
        let directory = NSTemporaryDirectory() + "sync-cli-\(UUID().uuidString.prefix(8))"
        let socket = directory + "/agent.sock"
        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--socket-path", socket])
        defer { agent.cleanup() }
        _ = try await agent.port()
        #expect(await eventually { agent.log.contains("agent socket listening") }, "log:\n\(agent.log)")
        try await body(socket)
        agent.signal(SIGTERM)
        #expect(await agent.exitStatus() == 0)
        #expect(!FileManager.default.fileExists(atPath: socket), "the socket is removed at shutdown")
    }

    @Test func goldenOutputs() async throws {
        try await Self.withAgent { socket in
            func run(_ arguments: String...) async -> String { await Self.sync(arguments, socket: socket).output }
            #expect(await run("ping") == "Success\n")
            #expect(await run("list") == "No units registered\n")
            #expect(await run("list", "--output", "json") == "null\n")
            #expect(await run("start", "test-unit") == "Unit \"test-unit\" started with no dependencies\n")
            #expect(await run("want", "other", "dep-1", "dep-2", "dep-3") == "Unit \"other\" declared dependencies: [dep-1, dep-2, dep-3]\n")
            #expect(await run("status", "other").contains("dep-3"))

            _ = await run("want", "pending-unit", "dep-unit")
            #expect(
                await run("status", "pending-unit") == """
                    Unit: pending-unit
                    Status: pending
                    Ready: false

                    Dependencies:
                    DEPENDS ON  REQUIRED STATUS  CURRENT STATUS  SATISFIED  
                    dep-unit    completed        not registered  false      

                    """)
            _ = await run("want", "two", "dep-a")
            _ = await run("want", "two", "dep-b")
            _ = await run("start", "dep-a")
            #expect(await run("complete", "dep-a") == "Success\n")
            #expect(
                await run("status", "two") == """
                    Unit: two
                    Status: pending
                    Ready: false

                    Dependencies:
                    DEPENDS ON  REQUIRED STATUS  CURRENT STATUS  SATISFIED  
                    dep-a       completed        completed       true       
                    dep-b       completed        not registered  false      

                    """)
            #expect(await run("status", "test-unit") == "Unit: test-unit\nStatus: started\nReady: true\n\nDependencies:\nNo dependencies found\n")
            // An unregistered unit is not claimed ready (the wire says ready).
            #expect(await run("status", "nobody") == "Unit: nobody\nStatus: not registered\nReady: false\n\nDependencies:\nNo dependencies found\n")
            _ = await run("start", "dep-b")
            _ = await run("complete", "dep-b")
            #expect(
                await run("status", "two", "--output", "json") == """
                    {
                      "unit_name": "two",
                      "status": "pending",
                      "is_ready": true,
                      "dependencies": [
                        {
                          "depends_on": "dep-a",
                          "required_status": "completed",
                          "current_status": "completed",
                          "is_satisfied": true
                        },
                        {
                          "depends_on": "dep-b",
                          "required_status": "completed",
                          "current_status": "completed",
                          "is_satisfied": true
                        }
                      ]
                    }

                    """)
            #expect(await run("start", "two") == "Unit \"two\" started immediately, dependencies already satisfied: [dep-a, dep-b]\n")
        }
    }

    @Test func listTableAndJSON() async throws {
        try await Self.withAgent { socket in
            func run(_ arguments: String...) async -> String { await Self.sync(arguments, socket: socket).output }
            _ = await run("start", "unit-a")
            _ = await run("start", "unit-b")
            _ = await run("complete", "unit-b")
            _ = await run("want", "unit-c", "unit-a")
            #expect(
                await run("list") == """
                    UNIT    STATUS     READY  
                    unit-a  started    true   
                    unit-b  completed  true   
                    unit-c  pending    false  

                    """)
            #expect(await run("list", "-o", "json").hasPrefix("[\n  {\n    \"unit_name\": \"unit-a\",\n    \"status\": \"started\",\n    \"is_ready\": true\n  },"))
            let dot = await run("list", "-o", "dot")
            #expect(dot.hasPrefix("digraph units {"))
            #expect(dot.contains("\"unit-c\" -> \"unit-a\" [label=\"completed\", color=red, style=dashed];"), "\(dot)")
            // Names quoted as DOT quotes them (JSON's \u003c showed literally in Graphviz).
            _ = await run("want", #"back\slash"#, "<html>")
            let odd = await run("list", "-o", "dot")
            #expect(odd.contains(#""back\\slash" -> "<html>""#), "\(odd)")
            #expect(odd.contains(#""<html>" [label="<html>\nnot registered", style=dashed];"#), "\(odd)")
        }
    }

    @Test func errorsAndExitCodes() async throws {
        try await Self.withAgent { socket in
            _ = await Self.sync(["want", "foo", "bar"], socket: socket)
            let cycle = await Self.sync(["want", "bar", "foo"], socket: socket)
            #expect(cycle.status == 1)
            #expect(cycle.output == "error: declare dependency failed: cannot add dependency: adding edge for unit \"bar\": failed to add dependency\nadding edge (bar -> foo): cycle detected\n")
            let waiting = await Self.sync(["start", "test-unit-2", "--timeout", "10s"], socket: socket)
            // The deadline covers the dial and each call: generous, so a loaded machine passes.
            #expect(waiting.status == 0, "no dependencies: starts at once")
            _ = await Self.sync(["want", "test-unit", "never"], socket: socket)
            let timeout = await Self.sync(["start", "test-unit", "--timeout", "100ms"], socket: socket)
            #expect(timeout.status == 1)
            // The reference's two answers to a deadline: met while waiting, or (a loaded
            // machine) already during the status call.
            #expect(
                timeout.output.hasSuffix("error: timeout waiting for dependencies of unit 'test-unit'\n")
                    || timeout.output.hasSuffix("error: get status failed: context deadline exceeded\n"), "\(timeout.output)")
            let arguments = await Self.sync(["want", "lonely"], socket: socket)
            #expect(arguments.status == 1)
            #expect(arguments.output == "error: at least two arguments are required: unit and one or more depends-on\n")
            #expect(await Self.sync(["complete", "foo"], socket: socket).output == "Success\n")
            let twice = await Self.sync(["complete", "foo"], socket: socket)
            #expect(twice.status == 1)
            #expect(twice.output == "error: complete unit failed: cannot complete unit \"foo\": checking status for unit \"foo\": same status already set\n")
        }
        // No agent: one line naming the path tried and how to change it.
        let missing = await Self.sync(["ping"], socket: "/nonexistent-dir/agent.sock")
        #expect(missing.status == 1)
        #expect(missing.output.hasPrefix("error: connect to agent socket: connect to socket: dial unix /nonexistent-dir/agent.sock: connect: no such file or directory"))
        #expect(missing.output.contains("--socket-path or CODER_AGENT_SOCKET_PATH"))
    }

    /// `want claude git`, `start claude` blocks until `complete git`; the waiting
    /// start wakes through the SyncWaitReady extension.
    @Test func startupScriptPair() async throws {
        try await Self.withAgent { socket in
            _ = await Self.sync(["want", "claude", "git"], socket: socket)
            let output = NSTemporaryDirectory() + "sync-claude-\(UUID().uuidString.prefix(8)).out"
            defer { unlink(output) }
            async let claude = Self.sync(["start", "claude"], socket: socket, outputPath: output)
            #expect(await Self.waiting(output))
            #expect(await Self.sync(["start", "git"], socket: socket).status == 0)
            #expect(await Self.sync(["complete", "git"], socket: socket).status == 0)
            let result = await claude
            #expect(result.status == 0)
            #expect(
                result.output == """
                    Unit "claude" is waiting for dependencies to be satisfied: [git]
                    Unit "claude" finished waiting for dependencies: [git]

                    """)
            #expect(await Self.sync(["status", "claude"], socket: socket).output.contains("Status: started"))
        }
    }

    /// Against an agent without the extension (the reference's service exactly), `start`
    /// falls back to polling SyncReady every second and still finishes.
    @Test func startFallsBackToPollingWithoutTheExtension() async throws {
        let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        let directory = NSTemporaryDirectory() + "sync-ref-\(UUID().uuidString.prefix(8))"
        let socket = directory + "/agent.sock"
        var service = AgentSocketService(
            units: UnitManager(), upward: ControlPlaneSession(configuration: .init(agentVersion: "0.1.0"), dialer: nil, logger: quiet))
        service.servesExtensions = false
        let server = AgentSocketServer(configuration: .init(path: socket), service: service, logger: quiet)
        let group = ServiceGroup(configuration: .init(services: [server], logger: quiet))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            #expect(await eventually { server.isListening })
            _ = await Self.sync(["want", "claude", "git"], socket: socket)
            let output = directory + "-claude.out"
            defer { unlink(output) }
            async let claude = Self.sync(["start", "claude", "--timeout", "120s"], socket: socket, outputPath: output)
            // Until the CLI has found git not ready (nothing on the agent's side shows a
            // polling client; a fixed 300 ms was too little on a loaded 2-core machine).
            #expect(await Self.waiting(output))
            _ = await Self.sync(["start", "git"], socket: socket)
            _ = await Self.sync(["complete", "git"], socket: socket)
            let result = await claude
            #expect(result.status == 0, "\(result.output)")
            #expect(result.output.hasSuffix("Unit \"claude\" finished waiting for dependencies: [git]\n"))
            await group.triggerGracefulShutdown()
            try await tasks.next()
        }
    }
}
