import AgentCore
import CoreMetrics
import Metrics

/// What the HTTP server counts (swift-metrics; the executable chooses the backend).
enum HTTPMetrics {
    /// Open connections (plain and WebSockets).
    static let connections = Gauge(label: "agent_http_connections")
    /// Connections closed to make room (they had waited longest for a request head).
    static let evicted = Counter(label: "agent_http_connections_evicted_total")
    /// Connections refused because every open one was busy.
    static let refused = Counter(label: "agent_http_connections_refused_total")

    /// Open WebSockets (they count against their own budget, not the connection cap).
    static let webSockets = Gauge(label: "agent_http_websockets")
    /// WebSocket handshakes refused (503) because the WebSockets' budget was used.
    static let webSocketsRefused = Counter(label: "agent_http_websockets_refused_total")

    /// Connections the server closed because the client stopped answering or broke a rule,
    /// by reason: `write_stall` (a response body the client did not read), `websocket_idle`
    /// (a WebSocket that answered no ping), `websocket_message_too_large` (a message over
    /// ``WebSocketLimits``), `websocket_protocol_error` (a continuation out of place),
    /// `websocket_invalid_utf8` (text that is not UTF-8).
    static func closed(_ reason: String) -> Counter {
        Counter(label: "agent_http_connections_closed_total", dimensions: [("reason", reason)])
    }

    /// Connections handed over from elsewhere and taken up, by listener (`tailnet`): they
    /// also count in every connection metric above, as accepted ones do. Listener names come
    /// from the agent's code, so the series are few.
    static func handedOver(_ listener: String) {
        Counter(label: "agent_http_connections_handed_over_total", dimensions: [("listener", listener)]).increment()
    }

    /// Hand-overs refused before serving, by reason: `not_serving`, `invalid_listener`.
    static func handOverRefused(_ reason: ConnectionHandOverError.Reason) {
        let label =
            switch reason {
            case .notServing: "not_serving"
            case .invalidListenerName: "invalid_listener"
            }
        Counter(label: "agent_http_handovers_refused_total", dimensions: [("reason", label)]).increment()
    }

    /// Answers the connection guard gave itself (408, 413, 414, 417, 431, 405, 400), by status.
    static func guardResponse(_ status: Int) {
        Counter(label: "agent_http_guard_responses_total", dimensions: [("status", "\(status)")]).increment()
    }
}
