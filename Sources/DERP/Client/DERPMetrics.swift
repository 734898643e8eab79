import CoreMetrics
import Metrics

/// The DERP client's swift-metrics counters (the backend is the executable's business).
enum DERPMetrics {
    static let connects = Counter(label: "agent_derp_connects_total")
    static let reconnects = Counter(label: "agent_derp_reconnects_total")
    static let framesSent = Counter(label: "agent_derp_frames_sent_total")
    static let framesReceived = Counter(label: "agent_derp_frames_received_total")
    static let bytesSent = Counter(label: "agent_derp_bytes_sent_total")
    static let bytesReceived = Counter(label: "agent_derp_bytes_received_total")

    /// Drops by reason (see ``DERPClientStatistics/drops``).
    static func dropped(_ reason: String, count: Int = 1) {
        Counter(label: "agent_derp_drops_total", dimensions: [("reason", reason)]).increment(by: count)
    }
}
