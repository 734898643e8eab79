import Metrics

/// What the transports count about the servers' flow (HELP texts in the executable's
/// `MetricsHelp`).
enum MCPFlowMetrics {
    /// `agent_mcp_unsolicited_dropped_total`: requests and notifications a server sent past
    /// its rate, dropped unanswered.
    private static let dropped = Counter(label: "agent_mcp_unsolicited_dropped_total")
    /// `agent_mcp_buffer_refusals_total`: buffers the shared memory budget refused to grow.
    private static let refusals = Counter(label: "agent_mcp_buffer_refusals_total")
    /// `agent_mcp_buffered_bytes`: bytes the servers' buffers hold (their capacity).
    private static let buffered = Gauge(label: "agent_mcp_buffered_bytes")

    static func droppedUnsolicited() { dropped.increment() }
    static func refused() { refusals.increment() }
    static func inUse(_ bytes: Int) { buffered.record(Double(bytes)) }
}
