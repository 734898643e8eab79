import AgentCore

/// Where an MCP server is reached: a program the agent starts (stdio), or a URL spoken to
/// with Streamable HTTP or the legacy HTTP+SSE transport, with the entry's static headers.
public enum MCPEndpoint: Sendable, Equatable {
    case stdio(MCPStdioCommand)
    case streamableHTTP(url: String, headers: [String: String])
    case sse(url: String, headers: [String: String])

    /// The endpoint of a `.mcp.json` entry: `stdio` starts `command` (see
    /// ``MCPStdioCommand/make(_:environment:directory:)``); `http` or an empty type is
    /// Streamable HTTP; `sse` the legacy transport; any other type fails with
    /// `unsupported transport "<t>"`.
    public static func make(_ config: MCPServerConfig, environment: [String: String], directory: String) throws(MCPError) -> MCPEndpoint {
        switch config.transport {
        case "stdio":
            return .stdio(try MCPStdioCommand.make(config, environment: environment, directory: directory))
        case "http", "":
            return .streamableHTTP(url: config.url, headers: config.headers)
        case "sse":
            return .sse(url: config.url, headers: config.headers)
        default:
            throw MCPError(.start, "unsupported transport \(goQuote(config.transport))")
        }
    }

    /// `stdio`, `http` or `sse`.
    public var transportName: String {
        switch self {
        case .stdio: "stdio"
        case .streamableHTTP: "http"
        case .sse: "sse"
        }
    }
}

extension MCPClientSession {
    /// Connects to `endpoint` as `serverName` and initializes the session.
    public static func connect(
        _ endpoint: MCPEndpoint, serverName: String, clientVersion: String, timeouts: Timeouts = Timeouts(),
        timing: MCPStdioProcess.Timing = .init(), owner: MCPStdioOwner? = nil, budget: MCPMemoryBudget = MCPMemoryBudget(),
        log: @escaping @Sendable (_ server: String, _ line: String) -> Void
    ) async throws(MCPError) -> MCPClientSession {
        switch endpoint {
        case .stdio(let command):
            return try await connect(command, clientVersion: clientVersion, timeouts: timeouts, timing: timing, owner: owner, budget: budget, log: log)
        case .streamableHTTP(let url, let headers):
            return try await connectRemote(
                url: url, headers: headers, legacySSE: false, serverName: serverName, clientVersion: clientVersion, timeouts: timeouts,
                budget: budget, log: log)
        case .sse(let url, let headers):
            return try await connectRemote(
                url: url, headers: headers, legacySSE: true, serverName: serverName, clientVersion: clientVersion, timeouts: timeouts,
                budget: budget, log: log)
        }
    }
}
