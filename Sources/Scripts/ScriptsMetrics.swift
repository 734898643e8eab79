import CoreMetrics
import Metrics

/// What the scripts count: the reference's two series (`agent_scripts_executed_total`,
/// `coderd_agentstats_startup_script_seconds`) and, under `agent_scripts_`, the output and
/// its way upward (queued, sent, refused by the full journal, rejected by the control plane).
struct ScriptsMetrics: Sendable {
    let executedOK = Counter(label: "agent_scripts_executed_total", dimensions: [("success", "true")])
    let executedFailed = Counter(label: "agent_scripts_executed_total", dimensions: [("success", "false")])
    /// Script runs going on now (start, stop, cron and on-demand).
    let running = Gauge(label: "agent_scripts_running")
    /// Cron ticks skipped because the script already had ``ScriptRunner/maxOverlappingRuns`` runs.
    let cronSkipped = Counter(label: "agent_scripts_cron_skipped_total")
    /// Bytes the scripts wrote (stdout and stderr).
    let outputBytes = Counter(label: "agent_scripts_output_bytes_total")
    let logLinesQueued = Counter(label: "agent_scripts_log_lines_total", dimensions: [("result", "queued")])
    let logLinesSent = Counter(label: "agent_scripts_log_lines_total", dimensions: [("result", "sent")])
    /// Lines the upload journal had no room for (the log files keep them).
    let logLinesRefused = Counter(label: "agent_scripts_log_lines_total", dimensions: [("result", "refused")])
    /// Lines the control plane refused (or that could not be read back).
    let logLinesRejected = Counter(label: "agent_scripts_log_lines_total", dimensions: [("result", "rejected")])
    let logBatchesSent = Counter(label: "agent_scripts_log_batches_total")
    /// Batches the control plane answered with an error (sent again after a wait).
    let logBatchesRefused = Counter(label: "agent_scripts_log_batches_refused_total")
    let reportsSent = Counter(label: "agent_scripts_completed_reports_total", dimensions: [("result", "sent")])
    let reportsRejected = Counter(label: "agent_scripts_completed_reports_total", dimensions: [("result", "rejected")])
    let reportsRefused = Counter(label: "agent_scripts_completed_reports_total", dimensions: [("result", "refused")])

    /// The start phase's length, set once (the reference's gauge).
    func startupDuration(_ seconds: Double, success: Bool) {
        Gauge(label: "coderd_agentstats_startup_script_seconds", dimensions: [("success", success ? "true" : "false")]).record(seconds)
    }

    func executed(success: Bool) {
        (success ? executedOK : executedFailed).increment()
    }
}
