import AgentCore
import Logging
import Synchronization

/// Why ``MCPServerManager/restart(_:)`` did not give the server a new session.
public enum MCPRestartFailure: Error, Sendable, Equatable {
    /// No server of that name is declared (404).
    case unknownServer(String)
    /// The engine is stopping (503).
    case closed
    /// The new session did not connect (502): why, secrets redacted.
    case failed(String)

    public var detail: String {
        switch self {
        case .unknownServer(let name): "unknown MCP server: \(goQuote(name))"
        case .closed: "the MCP engine is shutting down"
        case .failed(let why): why
        }
    }
}

extension MCPServerManager {
    /// Stops server `name` (a stdio server: stdin closed, then SIGTERM and SIGKILL to its
    /// process group) and connects it again now from its current entry, listing its tools
    /// anew: what a user runs after changing a server's code, which no reload notices.
    /// Calls in flight on the old session fail; a pending retry is superseded. Returns the
    /// server as ``servers`` shows it once the new session is up.
    public func restart(_ name: String) async throws(MCPRestartFailure) -> MCPServerStatus {
        enum Plan { case unknown, closed, restart(MCPServerConfig, old: MCPClientSession?) }
        let plan = state.withLock { s -> Plan in
            guard !s.closed else { return .closed }
            guard var server = s.servers[name] else { return .unknown }
            let old = server.session
            server.session = nil
            server.tools = nil
            server.state = .connecting
            server.error = ""
            server.failures = 0
            // A new generation: the old session's monitor and any pending retry are stale.
            server.generation = s.generation()
            server.retry = nil
            s.servers[name] = server
            return .restart(server.desired, old: old)
        }
        let config: MCPServerConfig
        switch plan {
        case .unknown: throw .unknownServer(name)
        case .closed: throw .closed
        case .restart(let desired, let old):
            config = desired
            if let old { await old.close() }
        }
        logger.info("mcp server restart requested", metadata: ["mcp_server": "\(name)"])
        let outcome = await connect(config, environment: serverEnvironment, directory: workingDirectory)
        await settle(config, outcome, isRetry: false)
        await list(name)
        publish()
        guard let status = servers.first(where: { $0.name == name }) else { throw .unknownServer(name) }
        if case .failure = outcome {
            throw .failed(status.lastError.isEmpty ? "failed to connect" : status.lastError)
        }
        return status
    }

    /// Whether a connect failure is one no retry can fix (the entry names a transport this
    /// engine does not speak): reported once in the server's `last_error`, not retried
    /// until the entry changes or a restart is asked for.
    static func isPermanent(_ error: MCPError) -> Bool {
        error.kind == .start && error.message.hasPrefix("unsupported transport ")
    }

    /// Each declared server's listed tools (reduced schemas, sorted by name), by name; a
    /// server without a listing has none.
    public var serverTools: [String: [ContextTool]] {
        state.withLock { s in s.servers.compactMapValues(\.tools) }
    }
}
