import AgentCore
import AgentTestSupport
import MCPEngine
import Testing

/// The MCP client over HTTP against plain-Python servers that break or barely follow the
/// protocol (`not_mcp_http.py`, no MCP SDK) or against no server at all. Cheap to start, so
/// its tests run side by side (no serialization needed).
@Suite(.timeLimit(.minutes(5)))
struct MCPHTTPTransportEdgeTests {
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

    @Test(arguments: MCPHTTPTransportTests.transports) func nobodyListeningIsAClearError(_ transport: String) async throws {
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

    /// A connection the server closes without answering (a server restarting, or closing a
    /// connection as a request arrives) is retried once on a new connection for what is safe
    /// to repeat, and never for a `tools/call`.
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

    /// Each request's connection is closed by the client once its answer is read, even by a
    /// server that would keep it alive for good, so no request ever goes out on a connection
    /// the server is closing as idle.
    @Test func eachRequestsConnectionIsClosedByTheClient() async throws {
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
