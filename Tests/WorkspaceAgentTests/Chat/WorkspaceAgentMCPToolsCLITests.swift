import AgentTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The MCP tools a user can see and the restart a user can ask for, through the real binary:
/// `GET /api/v0/mcp/servers?tools=true`, `POST /api/v0/mcp/servers/{name}/restart`, and
/// `exp chat context tools|restart` over the agent socket, with a raw stdio server whose
/// code changes while it runs.
/// Five minutes: the Python server's connect alone may take 150 s on a loaded host.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct WorkspaceAgentMCPToolsCLITests {
    @Test func toolsAreListedAndARestartPicksUpNewCode() async throws {
        let base = NSTemporaryDirectory() + "mcp-tools-\(UUID().uuidString.prefix(8))"
        let home = base, workdir = base + "/project"
        try FileManager.default.createDirectory(atPath: workdir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        let script = MCPServerScripts.named
        try TestFile.write(workdir + "/server.py", script, atomically: true)
        try TestFile.write(workdir + "/tool-name", "old_tool", atomically: true)
        try TestFile.write(
            workdir + "/.mcp.json", #"{"mcpServers":{"raw":{"command":"python3","args":["\#(workdir)/server.py"]}}}"#, atomically: true)
        var environment = WorkspaceAgentMCPTests.pythonEnvironment()
        environment["HOME"] = home
        let socket = base + "/agent.sock"
        let agent = try AgentDaemon.launch(
            ["--http-address", "127.0.0.1:0", "--socket-path", socket, "--directory", workdir], environment: environment)
        defer { agent.cleanup() }
        let client = RawHTTPClient(port: try await agent.port())
        func cli(_ arguments: String...) async -> (output: String, status: Int32) {
            await AgentDaemon.command(["exp", "chat", "context"] + arguments + ["--socket-path", socket], directory: workdir)
        }

        #expect(await eventually { agent.log.contains("agent socket listening") }, "log:\n\(agent.log)")
        #expect(await eventually(timeout: .seconds(150)) { (try? await WorkspaceAgentMCPTests.servers(client))?.first?["state"] as? String == "connected" })
        // Without the flag the rows are as before; with it, each server lists its tools.
        #expect(try await WorkspaceAgentMCPTests.servers(client).first?["tools"] == nil)
        let listed = try await client.request("GET", "/api/v0/mcp/servers?tools=true")
        let tools = (jsonObject(listed.body)?["servers"] as? [[String: Any]])?.first?["tools"] as? [[String: Any]]
        #expect(tools?.count == 1 && tools?.first?["name"] as? String == "old_tool", "\(listed)")
        #expect(tools?.first?["description"] as? String == "The old_tool tool.")
        let bad = try await client.request("GET", "/api/v0/mcp/servers?tools=maybe")
        #expect(bad.status == 400, "\(bad)")

        let table = await cli("tools")
        #expect(table.status == 0 && table.output.hasPrefix("SERVER") && table.output.contains("old_tool"), "\(table)")
        #expect(table.output.contains("The old_tool tool.") && table.output.contains("connected"), "\(table)")

        // The code changes; a restart from the CLI lists the new tool.
        try TestFile.write(workdir + "/tool-name", "new_tool", atomically: true)
        #expect(await cli("restart", "raw") == ("Restarted MCP server raw (1 tool).\n", 0))
        let json = await cli("tools", "raw", "-o", "json")
        #expect(json.status == 0 && json.output.contains("\"name\": \"new_tool\"") && !json.output.contains("old_tool"), "\(json)")
        let call = try await client.request("POST", "/api/v0/mcp/call-tool", json: #"{"tool_name":"raw__new_tool"}"#)
        #expect(call.status == 200 && String(decoding: call.body, as: UTF8.self).contains("new_tool"), "\(call)")

        // Unknown names: 404 over HTTP, a one-line error from the CLI.
        let unknown = try await client.request("POST", "/api/v0/mcp/servers/nope/restart")
        #expect(unknown.status == 404 && jsonObject(unknown.body)?["message"] as? String == "MCP server not found.", "\(unknown)")
        #expect(jsonObject(unknown.body)?["detail"] as? String == #"unknown MCP server: "nope""#)
        #expect(await cli("restart", "nope") == ("error: restart MCP server: unknown MCP server: \"nope\"\n", 1))
        #expect(await cli("tools", "nope") == ("error: list MCP tools: unknown MCP server: \"nope\"\n", 1))

        // Over HTTP: the server's row with its tools, once connected again.
        let restarted = try await client.request("POST", "/api/v0/mcp/servers/raw/restart")
        let row = jsonObject(restarted.body)
        #expect(restarted.status == 200 && row?["state"] as? String == "connected" && row?["restarts"] as? Int == 2, "\(restarted)")
        #expect((row?["tools"] as? [[String: Any]])?.first?["name"] as? String == "new_tool")

        agent.signal(SIGTERM)
        #expect(await agent.exitStatus() == 0)
    }
}

/// Raw stdio MCP servers (no SDK) for the agent's tests.
enum MCPServerScripts {
    /// One tool named by the `tool-name` file beside the script, read once at start.
    static let named = """
        import json, os, sys
        here = os.path.dirname(os.path.abspath(__file__))
        name = open(os.path.join(here, "tool-name")).read().strip()
        for line in sys.stdin:
            msg = json.loads(line)
            if "id" not in msg:
                continue
            method = msg["method"]
            if method == "initialize":
                result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                          "serverInfo": {"name": "raw", "version": "1"}}
            elif method == "tools/list":
                result = {"tools": [{"name": name, "description": "The " + name + " tool.", "inputSchema": {"type": "object"}}]}
            elif method == "tools/call":
                result = {"content": [{"type": "text", "text": name}]}
            else:
                result = {}
            print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
        """
}
