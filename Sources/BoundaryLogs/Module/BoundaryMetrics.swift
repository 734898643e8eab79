import CoreMetrics
import Metrics

/// The boundary log proxy's counters: the reference's three and
/// the spool's and sequence checks' own, all under `agent_boundary_log_proxy_`.
enum BoundaryMetrics {
    /// Batches dropped, by reason: `buffer_full` (memory queue full and no spool),
    /// `forward_failed` (the control plane refused it), `spool_full`.
    static func batchesDropped(_ reason: String) -> Counter {
        Counter(label: "agent_boundary_log_proxy_batches_dropped_total", dimensions: [("reason", reason)])
    }
    /// Log entries dropped, by the same reasons plus boundary's own `boundary_channel_full`
    /// and `boundary_batch_full` (reported in its status frames).
    static func logsDropped(_ reason: String) -> Counter {
        Counter(label: "agent_boundary_log_proxy_logs_dropped_total", dimensions: [("reason", reason)])
    }
    /// Batches read from boundary's connections (before any is forwarded, spooled or dropped).
    static let batchesReceived = Counter(label: "agent_boundary_log_proxy_batches_received_total")
    /// Batches the control plane acknowledged.
    static let batchesForwarded = Counter(label: "agent_boundary_log_proxy_batches_forwarded_total")
    /// Batches written to the agent's log because no control plane is configured.
    static let batchesLogged = Counter(label: "agent_boundary_log_proxy_batches_logged_total")
    /// Batches written to the disk spool, and the spool's size now.
    static let batchesSpooled = Counter(label: "agent_boundary_log_proxy_spool_batches_total")
    static let spoolBytes = Gauge(label: "agent_boundary_log_proxy_spool_bytes")
    /// Spool segments found torn (their rest skipped).
    static let spoolCorrupt = Counter(label: "agent_boundary_log_proxy_spool_corrupt_segments_total")
    /// Batches waiting in memory.
    static let queued = Gauge(label: "agent_boundary_log_proxy_batches_queued")
    /// Sequence numbers boundary skipped (entries it lost before sending) and repeated.
    static let sequenceGaps = Counter(label: "agent_boundary_log_proxy_sequence_gaps_total")
    static let sequenceDuplicates = Counter(label: "agent_boundary_log_proxy_sequence_duplicates_total")
    /// Connections closed for a bad header, and open now.
    static let framingErrors = Counter(label: "agent_boundary_log_proxy_framing_errors_total")
    static let connections = Gauge(label: "agent_boundary_log_proxy_connections")
}

extension BoundaryMetrics {
    /// Frames read and skipped, by reason: `undecodable` (a body that is not the protobuf
    /// its tag says) or `empty` (an envelope with neither logs nor status).
    static func framesSkipped(_ reason: String) -> Counter {
        Counter(label: "agent_boundary_log_proxy_frames_skipped_total", dimensions: [("reason", reason)])
    }

    /// Connections the agent closed, by reason: `evicted` (to let a new producer in),
    /// `partial_frame` (a frame begun and not finished in time), `idle`.
    static func disconnected(_ reason: String) -> Counter {
        Counter(label: "agent_boundary_log_proxy_disconnected_total", dimensions: [("reason", reason)])
    }
}
