import CoreMetrics
import Metrics

/// The agent socket's counters (swift-metrics; the executable serves them as Prometheus).
enum SocketMetrics {
    /// Open connections.
    static let connections = Gauge(label: "agent_socket_connections")
    /// Calls served, by method (`Ping`, `SyncStart`, ...).
    static func call(_ method: String) -> Counter {
        Counter(label: "agent_socket_calls_total", dimensions: [("method", method)])
    }
    /// Connections the agent closed, by reason: `protocol_error`, `partial_frame`,
    /// `evicted` (the quietest, to make room) and `peer_refused` (another user).
    static func disconnected(_ reason: String) -> Counter {
        Counter(label: "agent_socket_disconnected_total", dimensions: [("reason", reason)])
    }
}
