/// Where a declared server stands.
public enum MCPServerState: String, Sendable, CaseIterable {
    /// Its first connection is being made.
    case connecting
    /// Its session is up and its tools are listed.
    case connected
    /// Its session is up but `tools/list` failed; calls are still tried.
    case listFailed = "list_failed"
    /// It has no session and waits to be tried again (see ``MCPRestartPolicy``).
    case restarting
}

/// One declared server as `GET /api/v0/mcp/servers` shows it.
public struct MCPServerStatus: Sendable, Equatable {
    public var name: String
    /// `stdio`, `http` or `sse` (or the unsupported type the entry names).
    public var transport: String
    public var state: MCPServerState
    /// The last error or warning, secrets redacted; empty when none.
    public var lastError: String
    public var toolCount: Int
    /// Sessions started after the first (after a crash, a failed connect or a config change).
    public var restarts: Int
    /// The stdio server's pid while it runs.
    public var pid: Int32?
    /// The protocol version the server agreed to, while connected.
    public var protocolVersion: String?
    /// Calls in flight now.
    public var callsInFlight: Int
}
