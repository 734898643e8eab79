import AgentCore
import AgentTestSupport
import MCPEngine
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The MCP client over Streamable HTTP and the legacy HTTP+SSE transport, against the
/// official Python SDK's servers and raw HTTP servers that break the protocol.
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

    @Test func garbageAnswerFailsInitialize() async throws {
        let server = try await MCPHTTPTestServer.start("not_mcp_http.py", ["garbage"])
        let log = LogLines()
        await #expect {
            try await MCPTestServers.connect(.streamableHTTP(url: server.url("/mcp"), headers: [:]), log: log)
        } throws: { error in
            let error = error as? MCPError
            return error?.kind == .invalidResponse && error?.message.hasPrefix("initialize: the server wrote output that is not JSON-RPC: not JSON") == true
        }
        #expect(log.all.contains { $0.server == "test" && $0.line.hasPrefix("message is not JSON-RPC: not JSON") })
        await server.close()
    }

    @Test(arguments: ["huge-json", "huge-sse"]) func oversizeAnswerFailsTheRequest(_ mode: String) async throws {
        let server = try await MCPHTTPTestServer.start("not_mcp_http.py", [mode])
        await #expect {
            // A loaded host may take long to move 16 MiB from Python: the wait (initialize's,
            // the connect timeout) is generous, so only the size can fail the request.
            try await MCPTestServers.connect(.streamableHTTP(url: server.url("/mcp"), headers: [:]), timeouts: .init(connect: .seconds(600)))
        } throws: { error in
            let error = error as? MCPError
            return error?.kind == .invalidResponse && error?.message == "initialize: the server sent a message longer than 16777216 bytes"
        }
        await server.close()
    }

    @Test func errorStatusIsQuoted() async throws {
        let server = try await MCPHTTPTestServer.start("not_mcp_http.py", ["status"])
        await #expect {
            try await MCPTestServers.connect(.streamableHTTP(url: server.url("/mcp"), headers: [:]))
        } throws: { error in
            let error = error as? MCPError
            return error?.kind == .invalidResponse && error?.message == "initialize: HTTP 500: the server broke"
        }
        await server.close()
    }

    @Test func redirectToAnotherOriginIsRefused() async throws {
        let server = try await MCPHTTPTestServer.start("not_mcp_http.py", ["redirect"])
        for endpoint in [MCPEndpoint.streamableHTTP(url: server.url("/mcp"), headers: [:]), .sse(url: server.url("/sse"), headers: [:])] {
            let path = endpoint.transportName == "sse" ? "/sse" : "/mcp"
            await #expect {
                try await MCPTestServers.connect(endpoint)
            } throws: { error in
                let error = error as? MCPError
                return error?.kind == .invalidResponse
                    && error?.message == "initialize: refusing redirect from \(server.url(path)) to http://localhost:\(server.port)\(path): another origin"
            }
        }
        await server.close()
    }

    @Test func sseEndpointOnAnotherOriginIsRefused() async throws {
        let server = try await MCPHTTPTestServer.start("not_mcp_http.py", ["sse-off-origin"])
        await #expect {
            try await MCPTestServers.connect(.sse(url: server.url("/sse"), headers: [:]))
        } throws: { error in
            let error = error as? MCPError
            return error?.kind == .invalidResponse
                && error?.message == "initialize: refusing endpoint http://localhost:\(server.port)/messages: not on http://127.0.0.1:\(server.port)"
        }
        await server.close()
    }

    @Test(arguments: transports) func nobodyListeningIsAClearError(_ transport: String) async throws {
        let server = try await MCPHTTPTestServer.start("not_mcp_http.py", ["status"])
        await server.close()
        await #expect {
            // A refused connection fails at once, not at the connect timeout.
            try await MCPTestServers.connect(server.endpoint(transport), timeouts: .init(connect: .seconds(600)))
        } throws: { error in
            let error = error as? MCPError
            return error?.kind == .closed && error?.message == "initialize: server \"test\": \(transport == "sse" ? "GET" : "POST") \(server.url(transport == "sse" ? "/sse" : "/mcp")): connection refused"
        }
    }

    @Test func jsonAnswersSessionIDAndExpiry() async throws {
        let server = try await MCPHTTPTestServer.start("not_mcp_http.py", ["json"])
        let endpoint = MCPEndpoint.streamableHTTP(url: server.url("/mcp"), headers: [:])
        let session = try await MCPTestServers.connect(endpoint)
        #expect(session.protocolVersion == "2025-06-18")
        // The server answers only requests that carry its session id, and names the version.
        #expect(try await session.callTool("echo", arguments: nil).content.first?.text == "echo 2025-06-18")
        await session.close()
        #expect(await eventually { server.log.all.contains { $0.line == "DELETE sid-1" } })

        let expiring = try await MCPTestServers.connect(endpoint)
        await #expect {
            try await expiring.callTool("expire", arguments: nil)
        } throws: { error in
            let error = error as? MCPError
            return error?.kind == .closed && error?.message == "tools/call: server \"test\": the session expired (HTTP 404)"
        }
        var events: [MCPSessionEvent] = []
        for await event in expiring.events { events.append(event) }
        #expect(events.last == .ended("server \"test\": the session expired (HTTP 404)"))
        await expiring.close()
        await server.close()
    }

    /// A connection the server closes without answering (as when it closes an idle pooled
    /// connection just as a request arrives) is retried once on a fresh connection for what
    /// is safe to repeat, and never for a `tools/call` that reached the server.
    @Test func aRequestTheServerDroppedIsRetriedOnlyWhenSafe() async throws {
        let server = try await MCPHTTPTestServer.start("not_mcp_http.py", ["json-drop-once"])
        let url = server.url("/mcp")
        let session = try await MCPTestServers.connect(.streamableHTTP(url: url, headers: [:]))
        #expect(try await session.listTools().map(\.name) == ["echo"])
        func requests(_ method: String) -> [[Substring]] {
            server.log.all.map { $0.line.split(separator: " ") }.filter { $0.count == 4 && $0[0] == "REQUEST" && $0[3] == method }
        }
        // Each was dropped once, then sent again as the first request of a new connection.
        for method in ["initialize", "notifications/initialized", "tools/list"] {
            #expect(await eventually { requests(method).count == 2 }, "\(method)")
            #expect(requests(method).last?[2] == "1", "\(method)")
            #expect(requests(method).first?[1] != requests(method).last?[1], "\(method)")
        }
        await #expect {
            try await session.callTool("echo", arguments: nil)
        } throws: { error in
            let error = error as? MCPError
            return error?.kind == .closed && error?.message == "tools/call: server \"test\": POST \(url): the server closed the connection"
        }
        // The call reached the server once and was not sent again (a second one would have
        // been answered before the call failed).
        #expect(await eventually { !requests("tools/call").isEmpty })
        #expect(requests("tools/call").count == 1)
        await session.close()
        await server.close()
    }

    /// The client closes an idle pooled connection on its own, well before a server's
    /// keep-alive timeout would (uvicorn's is 5 s), so it never sends a request on a
    /// connection the server is closing.
    @Test func idleConnectionsAreClosedByTheClient() async throws {
        let server = try await MCPHTTPTestServer.start("not_mcp_http.py", ["json-keepalive"])
        let session = try await MCPTestServers.connect(.streamableHTTP(url: server.url("/mcp"), headers: [:]))
        #expect(try await session.callTool("echo", arguments: nil).content.first?.text == "echo 2025-06-18")
        func count(_ word: String) -> Int { server.log.all.filter { $0.line.hasPrefix(word + " ") }.count }
        // The server never closes a connection: every one that ends was closed by the client.
        #expect(await eventually { count("OPEN") > 0 && count("END") == count("OPEN") })
        #expect(try await session.callTool("echo", arguments: nil).content.first?.text == "echo 2025-06-18")
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

    @Test func aURLThatIsNotHTTPIsRefused() async throws {
        for endpoint in [MCPEndpoint.streamableHTTP(url: "ftp://127.0.0.1/mcp", headers: [:]), .sse(url: "not a url", headers: [:])] {
            await #expect {
                try await MCPTestServers.connect(endpoint)
            } throws: { error in
                let error = error as? MCPError
                return error?.kind == .start && error?.message.hasPrefix("server \"test\": ") == true && error?.message.hasSuffix(" is not an http or https URL") == true
            }
        }
    }
}
