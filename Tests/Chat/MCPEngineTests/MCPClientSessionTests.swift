import AgentCore
import AgentTestSupport
import MCPEngine
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The MCP client against real stdio servers written with the official Python SDK
/// (MCPClientSessionBrokenServerTests has the servers that break the protocol).
/// Serialized: each test starts Python SDK servers (about a CPU-second each to start); run
/// at once they would take both cores from the rest of the suite for a minute.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct MCPClientSessionTests {
    @Test func initializesListsAndCalls() async throws {
        let session = try await MCPTestServers.connect()
        #expect(session.protocolVersion == "2025-11-25")
        #expect(session.serverInfo.name == "engine-test")
        let tools = try await session.listTools()
        let names = tools.map(\.name)
        #expect(names.contains("echo") && names.contains("numbered_4") && names.count == 15)
        #expect(tools.first { $0.name == "echo" }?.description == "Echoes its text.")
        #expect(tools.first { $0.name == "echo" }?.inputSchema?["required"] == .array([.string("text")]))
        let result = try await session.callTool("echo", arguments: .object([("text", .string("hé \"quoted\"\n"))]))
        #expect(result == MCPToolResult(content: [MCPContentItem(type: "text", text: "hé \"quoted\"\n")], isError: false))
        let pid = session.pid
        await session.close()
        #expect(MCPTestServers.isGone(pid))
    }

    @Test func followsListPages() async throws {
        let whole = try await MCPTestServers.connect()
        let paged = try await MCPTestServers.connect("mcp_test_server.py", ["--page-size", "4"])
        let all = try await whole.listTools()
        #expect(try await paged.listTools() == all)
        await whole.close()
        await paged.close()
    }

    @Test func imageAndErrorResults() async throws {
        let session = try await MCPTestServers.connect()
        let picture = try await session.callTool("picture", arguments: nil)
        #expect(picture.isError == false)
        #expect(picture.content.count == 1)
        #expect(picture.content.first?.type == "image")
        #expect(picture.content.first?.mediaType == "image/png")
        #expect(picture.content.first?.data?.hasPrefix("iVBORw0KGgo") == true)
        let failed = try await session.callTool("fail", arguments: .object([]))
        #expect(failed.isError)
        #expect(failed.content.first?.type == "text")
        let unknown = try await session.callTool("no_such_tool", arguments: nil)
        #expect(unknown.isError)
        await session.close()
    }

    @Test func agentSecretsAreNotInherited() async throws {
        let command = try MCPTestServers.command(
            "mcp_test_server.py", extraEnvironment: ["CODER_AGENT_TOKEN": "secret", "CODER_AGENT_URL": "http://x", "KEPT": "yes"],
            env: ["CODER_AGENT_TOKEN": "also-secret", "FROM_ENTRY": "entry"])
        #expect(command.environment["CODER_AGENT_TOKEN"] == nil)
        let session = try await MCPClientSession.connect(command, clientVersion: "test") { _, _ in }
        for (name, expected) in [("CODER_AGENT_TOKEN", "<unset>"), ("CODER_AGENT_URL", "<unset>"), ("KEPT", "yes"), ("FROM_ENTRY", "entry")] {
            let result = try await session.callTool("environment", arguments: .object([("name", .string(name))]))
            #expect(result.content.first?.text == expected, "\(name)")
        }
        await session.close()
    }

    @Test func serverExitingMidCallFailsTheCallClearly() async throws {
        let session = try await MCPTestServers.connect()
        let pid = session.pid
        await #expect {
            try await session.callTool("crash", arguments: nil)
        } throws: { error in
            let error = error as? MCPError
            return error?.kind == .closed && error?.message == "tools/call: server \"test\" exited (exit status 3)"
        }
        var events: [MCPSessionEvent] = []
        for await event in session.events { events.append(event) }
        #expect(events.last == .ended("server \"test\" exited (exit status 3)"))
        await #expect(throws: MCPError.self) { try await session.listTools() }
        await session.close()
        #expect(MCPTestServers.isGone(pid))
        // Another session is unaffected.
        let other = try await MCPTestServers.connect()
        #expect(try await other.callTool("echo", arguments: .object([("text", .string("still"))])).content.first?.text == "still")
        await other.close()
    }

    @Test func notificationFloodIsBoundedAndHarmless() async throws {
        let session = try await MCPTestServers.connect()
        _ = try await session.callTool("flood_list_changed", arguments: .object([("count", .number("5000"))]))
        #expect(try await session.callTool("echo", arguments: .object([("text", .string("ok"))])).content.first?.text == "ok")
        await session.close()
        // The events kept are the newest few, not 5000.
        var count = 0
        for await _ in session.events { count += 1 }
        #expect(count <= MCPLimits.maxBufferedEvents)
    }

    @Test func stderrFloodIsBoundedAndTagged() async throws {
        let log = LogLines()
        let session = try await MCPTestServers.connect("mcp_test_server.py", ["--flood-stderr", "20000"], log: log)
        #expect(try await session.callTool("echo", arguments: .object([("text", .string("fine"))])).content.first?.text == "fine")
        await session.close()
        let lines = log.all
        #expect(lines.allSatisfy { $0.server == "test" })
        #expect(lines.count < 50_000)
        #expect(lines.contains { $0.line.contains("stderr lines dropped") })
    }

    @Test func cancellingTheCallCancelsItOnTheServer() async throws {
        let markers = "/tmp/mcp-engine-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        #expect(mkdir(markers, 0o700) == 0)
        defer {
            unlink(markers + "/started")
            unlink(markers + "/cancelled")
            rmdir(markers)
        }
        let session = try await MCPTestServers.connect("mcp_test_server.py", ["--marker-dir", markers])
        let call = Task { try await session.callTool("wait_forever", arguments: nil) }
        #expect(await eventually { access(markers + "/started", F_OK) == 0 })
        call.cancel()
        await #expect {
            try await call.value
        } throws: { error in
            (error as? MCPError)?.kind == .cancelled
        }
        #expect(await eventually { access(markers + "/cancelled", F_OK) == 0 })
        // The session goes on.
        #expect(try await session.callTool("echo", arguments: .object([("text", .string("after"))])).content.first?.text == "after")
        await session.close()
    }

    @Test func toolListChangeIsAnEvent() async throws {
        let session = try await MCPTestServers.connect()
        var events = session.events.makeAsyncIterator()
        _ = try await session.callTool("add_tool", arguments: .object([("name", .string("fresh"))]))
        #expect(await events.next() == .toolsChanged)
        #expect(try await session.listTools().contains { $0.name == "fresh" })
        await session.close()
    }

    @Test func callsInFlightAreBounded() async throws {
        let session = try await MCPTestServers.connect()
        var calls: [Task<MCPToolResult, any Error>] = []
        for _ in 0..<MCPLimits.maxConcurrentCalls {
            calls.append(Task { try await session.callTool("wait_forever", arguments: nil) })
        }
        // Each admitted call holds its slot until it ends; one more is refused at once.
        #expect(await eventually { session.callsInFlight == MCPLimits.maxConcurrentCalls })
        await #expect {
            try await session.callTool("echo", arguments: .object([("text", .string("x"))]))
        } throws: { error in
            let error = error as? MCPError
            return error?.kind == .unavailable && error?.message == "server \"test\" has 16 calls in flight"
        }
        for call in calls { call.cancel() }
        for call in calls { _ = try? await call.value }
        #expect(try await session.callTool("echo", arguments: .object([("text", .string("free"))])).content.first?.text == "free")
        await session.close()
    }

    @Test func callTimeoutCancelsOnTheServer() async throws {
        let session = try await MCPTestServers.connect()
        await #expect {
            try await session.callTool("wait_forever", arguments: nil, timeout: .milliseconds(300))
        } throws: { error in
            let error = error as? MCPError
            return error?.kind == .timeout && error?.message == "tools/call: timed out after 0.3 seconds"
        }
        await session.close()
    }
}
