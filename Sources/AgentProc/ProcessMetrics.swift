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

    /// Starts answered with an earlier start's process (the same tool call retried).
    static let startsReplayed = Counter(label: "agent_process_starts_replayed_total")
    /// Bytes written to children's stdin (pipes and terminals).
    static let stdinBytes = Counter(label: "agent_process_stdin_bytes_total")
    /// Processes of an earlier agent restored at start-up (`lost` ones included).
    static let restored = Counter(label: "agent_processes_restored_total")

    /// Writes of the process records or tool-call claims logs that failed (each is rewritten
    /// whole at its next change).
    static let durableLogFailures = Counter(label: "agent_process_durable_log_failures_total")
    /// Failure log lines left out by the rate limit (``DurableFailures/logInterval``).
    static let failureLogsSuppressed = Counter(label: "agent_process_durable_failure_logs_suppressed_total")
    /// Tool-call starts refused (503) because their claim could not be written durably.
    static let startsUnclaimed = Counter(label: "agent_process_starts_unclaimed_total")
    /// Bytes written to output spools on disk.
    static let spoolBytesWritten = Counter(label: "agent_process_spool_written_bytes_total")
    /// Failed writes to spool files (the bytes involved count as dropped).
    static let spoolWriteErrors = Counter(label: "agent_process_spool_write_errors_total")
    /// Bytes of output on disk now (all spools).
    static let spoolBytes = Gauge(label: "agent_process_spool_bytes")

    /// Spooled bytes dropped, oldest first: `process_cap` (a process's own bound), `total_cap`
    /// (the bound on all), `write_error`.
    static func spoolDropped(_ count: UInt64, _ cause: StoreState.Cause) {
        let reason =
            switch cause {
            case .perSpool: "process_cap"
            case .total: "total_cap"
            case .writeError: "write_error"
            }
        Counter(label: "agent_process_spool_dropped_bytes_total", dimensions: [("reason", reason)]).increment(by: Int(clamping: count))
    }

    /// A stdin write that failed: `stalled` (the child did not read in time, or a write
    /// before it did not), `closed`, `busy` (too much queued), `too_large`, `line_too_long`
    /// (a terminal in line mode would discard part of it), `error`.
    static func stdinRefused(_ reason: String) {
        Counter(label: "agent_process_stdin_refused_total", dimensions: [("reason", reason)]).increment()
    }

    /// An await that ended: `matched`, `port_open`, `exited` or `timeout` (a client that left counts as `timeout`).
    static func awaited(_ condition: String) {
        Counter(label: "agent_process_awaits_total", dimensions: [("condition", condition)]).increment()
    }

    /// A stream subscriber the agent disconnected: `stalled` (accepted no data in time) or
    /// `close_timeout` (did not answer the close frame).
    static func disconnected(_ reason: String) {
        Counter(label: "agent_stream_disconnected_total", dimensions: [("reason", reason)]).increment()
    }
}
