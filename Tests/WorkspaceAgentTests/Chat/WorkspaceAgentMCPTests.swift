import AgentTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The MCP engine through the real binary, standalone (the gate opens at start), with a real
/// Python SDK server declared in the working directory's `.mcp.json`: the servers list,
/// call-tool's shapes, statuses and texts, the server in the context snapshot, the agent's
/// variables withheld from the server, and a call cancelled by the client leaving.
/// Serialized: each test starts Python SDK servers (about a CPU-second each to start); run
/// at once they would take both cores from the rest of the suite for a minute.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct WorkspaceAgentMCPTests {
    static let servers: String = {
        // This file is in Tests/WorkspaceAgentTests/Chat; the servers in Tests/Chat/MCPEngineTests.
        var tests = Substring("\(#filePath)")
        for _ in 0..<3 { tests = tests[..<tests.lastIndex(of: "/")!] }
        return String(tests) + "/Chat/MCPEngineTests/Servers"
    }()

    static func pythonEnvironment() -> [String: String] {
        var env: [String: String] = ["PYTHONUNBUFFERED": "1"]
        for name in ["PATH", "PYTHONPATH", "PYENV_ROOT", "PYENV_VERSION"] {
            if let value = ProcessInfo.processInfo.environment[name] { env[name] = value }
        }
        return env
    }

    static func servers(_ client: RawHTTPClient) async throws -> [[String: Any]] {
        let response = try await client.request("GET", "/api/v0/mcp/servers")
        return jsonObject(response.body)?["servers"] as? [[String: Any]] ?? []
    }

    @Test func callToolServersAndTheSnapshot() async throws {
        let base = NSTemporaryDirectory() + "mcp-agent-\(UUID().uuidString.prefix(8))"
        let workdir = base + "/project", markers = base + "/markers"
        try FileManager.default.createDirectory(atPath: workdir, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: markers, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        let config = """
            {"mcpServers": {
              "alpha": {"command": "python3", "args": ["\(Self.servers)/mcp_test_server.py", "--marker-dir", "\(markers)"]},
              "bad__name": {"command": "true"}
            }}
            """
        try TestFile.write(workdir + "/.mcp.json", config, atomically: true)
        var environment = Self.pythonEnvironment()
        environment["HOME"] = base
        environment["CODER_AGENT_SECRET_FOR_TEST"] = "do-not-leak"
        let launched = ContinuousClock.now
        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--directory", workdir], environment: environment)
        defer { agent.cleanup() }
        let port = try await agent.port()
        let client = RawHTTPClient(port: port)

        // The Python SDK's server takes about a CPU-second to start, and over 30 s beside the
        // suite's other tests on a loaded 2-core host: past the agent's connect bound (30 s),
        // after which the agent restarts it. The wait leaves room for that retry.
        #expect(await eventually(timeout: .seconds(150)) { (try? await Self.servers(client))?.first?["state"] as? String == "connected" })
        let waited = ContinuousClock.now - launched
        let alpha = try #require(try await Self.servers(client).first)
        #expect(alpha["name"] as? String == "alpha" && alpha["transport"] as? String == "stdio", "\(alpha)")
        #expect((alpha["tool_count"] as? Int ?? 0) >= 5, "\(alpha)")
        // Connected before any connect could time out: nothing may have been restarted.
        #expect(alpha["restarts"] as? Int == 0 || waited >= .seconds(30), "\(alpha) after \(waited)")
        #expect(try await Self.servers(client).count == 1)

        // 200 with text, image, and a tool's own failure.
        let echo = try await client.request("POST", "/api/v0/mcp/call-tool", json: #"{"tool_name":"alpha__echo","arguments":{"text":"hi"}}"#)
        #expect(echo.status == 200 && String(decoding: echo.body, as: UTF8.self) == #"{"content":[{"text":"hi","type":"text"}],"is_error":false}"# + "\n", "\(echo)")
        let picture = try await client.request("POST", "/api/v0/mcp/call-tool", json: #"{"tool_name":"alpha__picture"}"#)
        let item = (jsonObject(picture.body)?["content"] as? [[String: Any]])?.first
        #expect(item?["type"] as? String == "image" && item?["media_type"] as? String == "image/png", "\(picture)")
        #expect(Data(base64Encoded: item?["data"] as? String ?? "")?.starts(with: [0x89, 0x50, 0x4E, 0x47]) == true)
        let failed = try await client.request("POST", "/api/v0/mcp/call-tool", json: #"{"tool_name":"alpha__fail","arguments":null}"#)
        #expect(failed.status == 200 && jsonObject(failed.body)?["is_error"] as? Bool == true, "\(failed)")

        // The server does not get the agent's own variables.
        let env = try await client.request(
            "POST", "/api/v0/mcp/call-tool", json: #"{"tool_name":"alpha__environment","arguments":{"name":"CODER_AGENT_SECRET_FOR_TEST"}}"#)
        #expect(String(decoding: env.body, as: UTF8.self).contains("<unset>"), "\(env)")

        // Errors: 400, 404, 502 with the reference's texts; bad bodies 400.
        let badName = try await client.request("POST", "/api/v0/mcp/call-tool", json: #"{"tool_name":"alphaecho"}"#)
        #expect(badName.status == 400 && jsonObject(badName.body)?["message"] as? String == "MCP tool call failed.")
        #expect(jsonObject(badName.body)?["detail"] as? String == #"invalid tool name format: expected format "server__tool", got "alphaecho""#)
        let unknown = try await client.request("POST", "/api/v0/mcp/call-tool", json: #"{"tool_name":"beta__echo"}"#)
        #expect(unknown.status == 404 && jsonObject(unknown.body)?["detail"] as? String == #"unknown MCP server: "beta""#)
        let noTool = try await client.request("POST", "/api/v0/mcp/call-tool", json: #"{"tool_name":"alpha__no_such_tool"}"#)
        #expect(noTool.status == 502 || (noTool.status == 200 && jsonObject(noTool.body)?["is_error"] as? Bool == true), "\(noTool)")
        if noTool.status == 502 {
            #expect((jsonObject(noTool.body)?["detail"] as? String)?.hasPrefix(#"call tool "no_such_tool" on "alpha": "#) == true)
        }
        let notObject = try await client.request("POST", "/api/v0/mcp/call-tool", json: #"{"tool_name":"alpha__echo","arguments":[1]}"#)
        #expect(notObject.status == 400 && jsonObject(notObject.body)?["message"] as? String == "Request body must be valid JSON.", "\(notObject)")
        let malformed = try await client.request("POST", "/api/v0/mcp/call-tool", json: #"{"tool_name":"#)
        #expect(malformed.status == 400, "\(malformed)")

        // The server is in the context snapshot with its tools; the bad entry is not a server.
        let snapshot = try await client.request("POST", "/api/v0/context/resync", json: "")
        let resources = jsonObject(snapshot.body)?["resources"] as? [[String: Any]] ?? []
        let server = resources.first { $0["id"] as? String == "mcp_server:alpha" }
        #expect(server?["status"] as? String == "ok" && server?["name"] as? String == "alpha", "\(snapshot)")

        // A call whose client leaves is cancelled on the server.
        let fd = try Self.connect(port: port)
        let body = #"{"tool_name":"alpha__wait_forever"}"#
        let request = "POST /api/v0/mcp/call-tool HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
        _ = request.withCString { send(fd, $0, strlen($0), 0) }
        #expect(await eventually { FileManager.default.fileExists(atPath: markers + "/started") })
        close(fd)
        #expect(await eventually { FileManager.default.fileExists(atPath: markers + "/cancelled") })
        #expect(await eventually { (try? await Self.servers(client))?.first?["calls_in_flight"] as? Int == 0 })
    }

    /// SIGTERM ends the agent with its MCP servers: a connected one, and one that never
    /// answers `initialize` and ignores stdin's end and SIGTERM (with a child in its group).
    @Test func shutdownEndsEveryServerTheAgentStarted() async throws {
        let base = NSTemporaryDirectory() + "mcp-stop-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        let marker = "stubborn-\(UUID().uuidString)"
        let config = """
            {"mcpServers": {
              "alpha": {"command": "python3", "args": ["\(Self.servers)/mcp_test_server.py"]},
              "stubborn": {"command": "python3", "args": ["\(Self.servers)/not_mcp.py", "stubborn", "\(marker)"]}
            }}
            """
        try TestFile.write(base + "/.mcp.json", config, atomically: true)
        var environment = Self.pythonEnvironment()
        environment["HOME"] = base
        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--directory", base], environment: environment)
        defer { agent.cleanup() }
        let client = RawHTTPClient(port: try await agent.port())
        #expect(await eventually(timeout: .seconds(150)) { (try? await Self.servers(client))?.first { $0["name"] as? String == "alpha" }?["state"] as? String == "connected" })
        let alpha = try #require(try await Self.servers(client).first { $0["name"] as? String == "alpha" }?["pid"] as? Int)
        // The stubborn server has started its child (it names it on stderr, which the agent logs).
        var child: Int32?
        #expect(
            await eventually {
                if let range = agent.log.range(of: #"child (\d+)"#, options: .regularExpression) {
                    child = Int32(agent.log[range].split(separator: " ").last!)
                }
                return child != nil
            })
        #expect(Self.processes(containing: marker).count == 1)

        agent.signal(SIGTERM)
        #expect(await agent.exitStatus(timeout: .seconds(60)) != nil)
        #expect(await eventually { kill(pid_t(alpha), 0) != 0 })
        #expect(await eventually { Self.processes(containing: marker).isEmpty }, "\(agent.log)")
        if let child { #expect(await eventually { kill(child, 0) != 0 }) }
    }

    /// Pids whose command line contains `text`.
    static func processes(containing text: String) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> Int32? in
            guard let pid = Int32(entry),
                let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline")
            else { return nil }
            return String(decoding: data, as: UTF8.self).contains(text) ? pid : nil
        }
    }

    static func connect(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(result == 0)
        return fd
    }
}
