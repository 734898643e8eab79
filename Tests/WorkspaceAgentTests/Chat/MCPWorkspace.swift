import AgentTestSupport
import Foundation

/// The real agent started standalone in a fresh directory whose `.mcp.json` the test
/// rewrites (empty at start), with Python on its path: for the MCP tests that measure the
/// binary itself.
struct MCPWorkspace {
    let base: String
    let workdir: String
    let agent: AgentDaemon
    let client: RawHTTPClient

    /// Starts the agent and waits until its MCP engine answers.
    static func start(_ prefix: String) async throws -> MCPWorkspace {
        let base = NSTemporaryDirectory() + "\(prefix)-\(UUID().uuidString.prefix(8))"
        let workdir = base + "/project"
        try FileManager.default.createDirectory(atPath: workdir, withIntermediateDirectories: true)
        try TestFile.write(workdir + "/.mcp.json", #"{"mcpServers": {}}"#, atomically: true)
        var environment = WorkspaceAgentMCPTests.pythonEnvironment()
        environment["HOME"] = base
        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--directory", workdir], environment: environment)
        let workspace = MCPWorkspace(base: base, workdir: workdir, agent: agent, client: RawHTTPClient(port: try await agent.port()))
        _ = await eventually { (try? await workspace.client.request("GET", "/api/v0/mcp/servers"))?.status == 200 }
        return workspace
    }

    /// Writes `.mcp.json` declaring `entries` (each `"name": {…}`).
    func declare(_ entries: [String]) throws {
        try TestFile.write(workdir + "/.mcp.json", #"{"mcpServers": {"# + entries.joined(separator: ",") + "}}", atomically: true)
    }

    /// The server rows of `GET /api/v0/mcp/servers`.
    func servers() async throws -> [[String: Any]] { try await WorkspaceAgentMCPTests.servers(client) }

    /// Stops the agent and removes the directory.
    func cleanup() {
        agent.cleanup()
        try? FileManager.default.removeItem(atPath: base)
    }
}
