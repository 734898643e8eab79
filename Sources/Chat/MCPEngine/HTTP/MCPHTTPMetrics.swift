import Metrics

/// What the HTTP transports count (HELP texts in the executable's `MetricsHelp`).
enum MCPHTTPMetrics {
    /// `agent_mcp_http_retries_total`: requests sent again on a fresh connection after their
    /// connection closed before any answer.
    private static let retries = Counter(label: "agent_mcp_http_retries_total")

    static func retried() { retries.increment() }

    /// `agent_mcp_http_requests_total{connection}`: requests answered, by whether their
    /// connection was `new` or `reused` (kept alive from an earlier request).
    private static let onNew = Counter(label: "agent_mcp_http_requests_total", dimensions: [("connection", "new")])
    private static let onReused = Counter(label: "agent_mcp_http_requests_total", dimensions: [("connection", "reused")])

    static func answered(reused: Bool) { (reused ? onReused : onNew).increment() }
}
