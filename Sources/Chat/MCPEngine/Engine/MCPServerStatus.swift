/// Where a declared server stands, or (for a row whose transport is `config`) a
/// configuration file in trouble.
public enum MCPServerState: String, Sendable, CaseIterable {
    /// A session is being made, or is up with its tools not listed yet.
    case connecting
    /// Its session is up and its tools are listed.
    case connected
    /// Its session is up but `tools/list` failed; calls are still tried.
    case listFailed = "list_failed"
    /// It has no session and waits to be tried again (see ``MCPRestartPolicy``).
    case restarting
    /// A configuration file that cannot be read or parsed; its last good servers run on.
    case invalid
    /// A configuration file gone for a moment; its servers are kept for a grace.
    case missing
    /// A configuration file that inotify cannot watch, so it is polled.
    case polling

    /// The states of servers (what the `agent_mcp_servers` gauge counts), not of the files'
    /// rows.
    public static var allCases: [MCPServerState] { [.connecting, .connected, .listFailed, .restarting] }
}

/// One declared server as `GET /api/v0/mcp/servers` shows it, or a configuration file in
/// trouble (transport `config`, named by its path, its state `invalid`, `missing` or
/// `polling`, what is wrong in ``lastError``).
public struct MCPServerStatus: Sendable, Equatable {
    public var name: String
    /// `stdio`, `http` or `sse` (or the unsupported type the entry names); `config` for a
    /// configuration file's row.
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
    /// Listed tools whose description the caps cut (``MCPToolBudget``: 8 KiB a tool, 256 KiB
    /// a server, 4 MiB for the catalog).
    public var descriptionsCut = 0
    /// Listed tools left out of the catalog (name or schema too large, the server's schemas over 1 MiB).
    public var toolsLeftOut = 0
}
