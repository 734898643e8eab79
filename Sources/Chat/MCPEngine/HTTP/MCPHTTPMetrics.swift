import Metrics

/// What the HTTP transports count (HELP texts in the executable's `MetricsHelp`).
enum MCPHTTPMetrics {
    /// `agent_mcp_http_retries_total`: requests sent again on a fresh connection after their
    /// connection closed before any answer.
    private static let retries = Counter(label: "agent_mcp_http_retries_total")

    static func retried() { retries.increment() }
}
