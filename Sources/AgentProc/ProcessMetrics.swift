import CoreMetrics
import Metrics

/// What the process API counts (swift-metrics; the executable chooses the backend).
enum ProcessMetrics {
    static let started = Counter(label: "agent_processes_started_total")
    static let exited = Counter(label: "agent_processes_exited_total")
    /// Processes whose shell still runs.
    static let running = Gauge(label: "agent_processes_running")
    /// Bytes read from children's output pipes.
    static let outputBytes = Counter(label: "agent_process_output_bytes_total")
    /// Stream subscribers attached now.
    static let subscribers = Gauge(label: "agent_stream_subscribers")
    /// Output bytes dropped for slow stream subscribers (announced to them as `omitted`).
    static let omittedBytes = Counter(label: "agent_stream_omitted_bytes_total")

    /// A stream subscriber the agent disconnected: `stalled` (accepted no data in time) or
    /// `close_timeout` (did not answer the close frame).
    static func disconnected(_ reason: String) {
        Counter(label: "agent_stream_disconnected_total", dimensions: [("reason", reason)]).increment()
    }
}
