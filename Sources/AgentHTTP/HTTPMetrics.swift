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

    /// Open WebSockets (they count against their own share of the cap).
    static let webSockets = Gauge(label: "agent_http_websockets")
    /// WebSocket handshakes refused (503) because the WebSockets' share of the cap was used.
    static let webSocketsRefused = Counter(label: "agent_http_websockets_refused_total")

    /// Connections the server closed because the client stopped answering, by reason:
    /// `write_stall` (a response body the client did not read), `websocket_idle` (a
    /// WebSocket that answered no ping).
    static func closed(_ reason: String) -> Counter {
        Counter(label: "agent_http_connections_closed_total", dimensions: [("reason", reason)])
    }

    /// Answers the connection guard gave itself (408, 413, 414, 417, 431, 405, 400), by status.
    static func guardResponse(_ status: Int) {
        Counter(label: "agent_http_guard_responses_total", dimensions: [("status", "\(status)")]).increment()
    }
}
