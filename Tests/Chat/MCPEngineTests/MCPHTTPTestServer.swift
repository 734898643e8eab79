import AgentCore
import AgentTestSupport
import MCPEngine

/// A Python HTTP server the tests start (an MCP server in an HTTP mode, or `not_mcp_http.py`):
/// its process, owned and shut down by the test, and the port it wrote to stderr.
struct MCPHTTPTestServer {
    enum Failure: Error { case noPort([String]) }

    let process: MCPStdioProcess
    let port: Int
    /// The server's stderr lines.
    let log: LogLines

    static func start(_ script: String, _ args: [String]) async throws -> MCPHTTPTestServer {
        let log = LogLines()
        // The server ignores stdin; SIGTERM at once, SIGKILL after the grace.
        let process = try MCPStdioProcess.start(
            try MCPTestServers.command(script, args), timing: .init(stdinGrace: .zero, termGrace: .seconds(5)),
            stderrLine: { log.append("server", $0) }, events: { _ in })
        guard await eventually({ log.all.contains { $0.line.hasPrefix("PORT ") } || process.isFinished }),
            let line = log.all.first(where: { $0.line.hasPrefix("PORT ") }), let port = Int(line.line.dropFirst(5))
        else {
            await process.close()
            throw Failure.noPort(log.all.map(\.line))
        }
        return MCPHTTPTestServer(process: process, port: port, log: log)
    }

    /// The MCP test server over `transport` (`streamable-http` or `sse`).
    static func mcp(_ transport: String, _ args: [String] = []) async throws -> MCPHTTPTestServer {
        try await start("mcp_test_server.py", ["--transport", transport] + args)
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// The endpoint of the MCP test server over `transport`.
    func endpoint(_ transport: String, headers: [String: String] = [:]) -> MCPEndpoint {
        transport == "sse" ? .sse(url: url("/sse"), headers: headers) : .streamableHTTP(url: url("/mcp"), headers: headers)
    }

    func close() async { await process.close() }
}

extension MCPTestServers {
    /// A session with `endpoint` named `test`.
    static func connect(
        _ endpoint: MCPEndpoint, timeouts: MCPClientSession.Timeouts = .init(), log: LogLines = LogLines()
    ) async throws(MCPError) -> MCPClientSession {
        try await MCPClientSession.connect(endpoint, serverName: "test", clientVersion: "test", timeouts: timeouts) { server, line in
            log.append(server, line)
        }
    }
}
