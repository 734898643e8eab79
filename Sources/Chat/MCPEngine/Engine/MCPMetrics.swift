import Metrics

/// The MCP engine's metrics (HELP texts in the executable's `MetricsHelp`).
struct MCPMetrics: Sendable {
    /// `agent_mcp_tool_call_duration_seconds`: the time of each call through the agent.
    let callDuration = Metrics.Timer(label: "agent_mcp_tool_call_duration")
    /// `agent_mcp_server_restarts_total`: sessions started again after a crash or a failed connect.
    let restarts = Counter(label: "agent_mcp_server_restarts_total")

    /// `agent_mcp_tool_calls_total{outcome}`: ok, tool_error, failed, timeout, cancelled,
    /// busy, unknown_server, invalid_name.
    func call(_ outcome: String) {
        Counter(label: "agent_mcp_tool_calls_total", dimensions: [("outcome", outcome)]).increment()
    }

    /// `agent_mcp_servers{state}`: the declared servers by state.
    func servers(_ states: [MCPServerState]) {
        for state in MCPServerState.allCases {
            Gauge(label: "agent_mcp_servers", dimensions: [("state", state.rawValue)])
                .record(Double(states.count { $0 == state }))
        }
    }

    func recordCall(since started: ContinuousClock.Instant) {
        let (seconds, attoseconds) = (ContinuousClock.now - started).components
        callDuration.recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
