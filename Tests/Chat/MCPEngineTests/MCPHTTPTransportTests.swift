import AgentCore
import AgentTestSupport
import MCPEngine
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The MCP client over Streamable HTTP and the legacy HTTP+SSE transport, against the
/// official Python SDK's servers (MCPHTTPTransportEdgeTests has the servers that break it).
/// Serialized: each test starts Python SDK servers (about a CPU-second each to start); run
/// at once they would take both cores from the rest of the suite for a minute.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct MCPHTTPTransportTests {
    static let transports = ["streamable-http", "sse"]

    @Test(arguments: transports) func initializesListsAndCalls(_ transport: String) async throws {
        let server = try await MCPHTTPTestServer.mcp(transport)
        let session = try await MCPTestServers.connect(server.endpoint(transport))
        #expect(session.protocolVersion == "2025-11-25")
        #expect(session.serverInfo.name == "engine-test")
        #expect(session.pid == 0)
        #expect(session.transportName == (transport == "sse" ? "sse" : "http"))
        let tools = try await session.listTools()
        #expect(tools.count == 15 && tools.contains { $0.name == "echo" })
        let echoed = try await session.callTool("echo", arguments: .object([("text", .string("hé \"quoted\"\n"))]))
        #expect(echoed == MCPToolResult(content: [MCPContentItem(type: "text", text: "hé \"quoted\"\n")], isError: false))
        let picture = try await session.callTool("picture", arguments: nil)
        #expect(picture.content.first?.type == "image" && picture.content.first?.mediaType == "image/png")
        #expect(picture.content.first?.data?.hasPrefix("iVBORw0KGgo") == true)
        let failed = try await session.callTool("fail", arguments: .object([]))
        #expect(failed.isError && failed.content.first?.type == "text")
        await session.close()
        var events: [MCPSessionEvent] = []
        for await event in session.events { events.append(event) }
        #expect(events.last == .ended("server \"test\" was closed"))
        await server.close()
    }

    @Test(arguments: transports) func followsListPages(_ transport: String) async throws {
        let server = try await MCPHTTPTestServer.mcp(transport, ["--page-size", "4"])
        let session = try await MCPTestServers.connect(server.endpoint(transport))
        let tools = try await session.listTools()
        #expect(tools.count == 15 && Set(tools.map(\.name)).count == 15)
        await session.close()
        await server.close()
    }

    @Test(arguments: transports) func staticHeadersGoOnEveryRequestButNeverOverrideTheProtocols(_ transport: String) async throws {
        let server = try await MCPHTTPTestServer.mcp(transport)
        let headers = ["X-Test-Token": "abc", "Accept": "text/plain", "Content-Type": "text/plain", "Mcp-Session-Id": "forged"]
        let session = try await MCPTestServers.connect(server.endpoint(transport, headers: headers))
        func header(_ name: String) async throws -> String? {
            try await session.callTool("header", arguments: .object([("name", .string(name))])).content.first?.text
        }
        #expect(try await header("x-test-token") == "abc")
        #expect(try await header("content-type") == "application/json")
        #expect(try await header("accept") == "application/json, text/event-stream")
        if transport == "streamable-http" {
            #expect(try await header("mcp-session-id") != "forged")
            #expect(try await header("mcp-session-id") != "<unset>")
            #expect(try await header("mcp-protocol-version") == "2025-11-25")
        }
        await session.close()
        await server.close()
    }

    @Test(arguments: transports) func timeoutAndCancellationReachTheServer(_ transport: String) async throws {
        let markers = "/tmp/mcp-engine-http-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        #expect(mkdir(markers, 0o700) == 0)
        defer {
            unlink(markers + "/started")
            unlink(markers + "/cancelled")
            rmdir(markers)
        }
        let server = try await MCPHTTPTestServer.mcp(transport, ["--marker-dir", markers])
        let session = try await MCPTestServers.connect(server.endpoint(transport))
        // The call and its cancellation are separate POSTs: a loaded server may take the
        // cancellation first (and then run the call to no end), so a longer timeout is tried
        // when the short one gave no cancelled call; a client that never cancels fails all.
        var cancelled = false
        for timeout in [Duration.milliseconds(500), .seconds(4), .seconds(16)] where !cancelled {
            await #expect {
                try await session.callTool("wait_forever", arguments: nil, timeout: timeout)
            } throws: { error in
                let error = error as? MCPError
                return error?.kind == .timeout && error?.message == "tools/call: timed out after \(timeout)"
            }
            cancelled = await eventually(timeout: .seconds(10)) { access(markers + "/cancelled", F_OK) == 0 }
        }
        #expect(cancelled)
        unlink(markers + "/started")
        unlink(markers + "/cancelled")
        let call = Task { try await session.callTool("wait_forever", arguments: nil) }
        #expect(await eventually { access(markers + "/started", F_OK) == 0 })
        call.cancel()
        await #expect {
            try await call.value
        } throws: { error in
            (error as? MCPError)?.kind == .cancelled
        }
        #expect(await eventually { access(markers + "/cancelled", F_OK) == 0 })
        #expect(try await session.callTool("echo", arguments: .object([("text", .string("after"))])).content.first?.text == "after")
        await session.close()
        await server.close()
    }

    @Test(arguments: transports) func serverGoingAwayMidCallEndsTheSession(_ transport: String) async throws {
        let server = try await MCPHTTPTestServer.mcp(transport)
        let session = try await MCPTestServers.connect(server.endpoint(transport))
        await #expect {
            try await session.callTool("crash", arguments: nil)
        } throws: { error in
            let error = error as? MCPError
            return error?.kind == .closed && error?.message.hasPrefix("tools/call: server \"test\"") == true
        }
        var events: [MCPSessionEvent] = []
        for await event in session.events { events.append(event) }
        guard case .ended(let reason)? = events.last else {
            Issue.record("no end: \(events)")
            return
        }
        #expect(reason.hasPrefix("server \"test\""))
        await #expect(throws: MCPError.self) { try await session.listTools() }
        await session.close()
        await server.close()
    }

    @Test(arguments: transports) func toolListChangeIsAnEvent(_ transport: String) async throws {
        let server = try await MCPHTTPTestServer.mcp(transport)
        let session = try await MCPTestServers.connect(server.endpoint(transport))
        var events = session.events.makeAsyncIterator()
        // The GET stream may open after the first call: announce until the event arrives.
        let announcer = Task {
            for index in 0..<300 where !Task.isCancelled {
                _ = try? await session.callTool("add_tool", arguments: .object([("name", .string("fresh\(index)"))]))
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
        #expect(await events.next() == .toolsChanged)
        announcer.cancel()
        _ = await announcer.value
        #expect(try await session.listTools().contains { $0.name == "fresh0" })
        await session.close()
        await server.close()
    }

    @Test(arguments: transports) func callsRunConcurrentlyOnTheServer(_ transport: String) async throws {
        let server = try await MCPHTTPTestServer.mcp(transport)
        let session = try await MCPTestServers.connect(server.endpoint(transport))
        let waiting = MCPLimits.maxConcurrentCalls - 1
        var calls: [Task<MCPToolResult, any Error>] = []
        for _ in 0..<waiting {
            calls.append(Task { try await session.callTool("wait_forever", arguments: nil) })
        }
        // Every call reaches the server at once (none queued behind another's connection).
        #expect(
            await eventually {
                (try? await session.callTool("waiting", arguments: nil, timeout: .seconds(5)))?.content.first?.text == String(waiting)
            })
        for call in calls { call.cancel() }
        for call in calls { _ = try? await call.value }
        await session.close()
        await server.close()
    }
}
