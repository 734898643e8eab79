import CoreMetrics
import Metrics

/// What the HTTP server counts (swift-metrics; the executable chooses the backend).
enum HTTPMetrics {
    /// Open connections.
    static let connections = Gauge(label: "agent_http_connections")
    /// Connections closed to make room (they had waited longest for a request head).
    static let evicted = Counter(label: "agent_http_connections_evicted_total")
    /// Connections refused because every open one was busy.
    static let refused = Counter(label: "agent_http_connections_refused_total")

    /// Answers the connection guard gave itself (408, 413, 414, 417, 431, 405, 400), by status.
    static func guardResponse(_ status: Int) {
        Counter(label: "agent_http_guard_responses_total", dimensions: [("status", "\(status)")]).increment()
    }
}
