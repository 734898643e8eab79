import CoreMetrics
import Metrics

/// The swift-metrics series of the app health, metadata and stats reporters (the backend is
/// the executable's business). `result` is `ok` or `error` for calls upward, `healthy` or
/// `failed` for health checks.
enum ReportMetrics {
    /// App health checks (one GET, redirects included) by outcome.
    private static let appHealthChecksHealthy = Counter(label: "agent_app_health_checks_total", dimensions: [("result", "healthy")])
    private static let appHealthChecksFailed = Counter(label: "agent_app_health_checks_total", dimensions: [("result", "failed")])
    /// `BatchUpdateAppHealths` calls by outcome.
    private static let appHealthReportsOK = Counter(label: "agent_app_health_reports_total", dimensions: [("result", "ok")])
    private static let appHealthReportsFailed = Counter(label: "agent_app_health_reports_total", dimensions: [("result", "error")])
    /// Metadata collections by outcome (`error`: the result carries an error text).
    private static let metadataCollectionsOK = Counter(label: "agent_metadata_collections_total", dimensions: [("result", "ok")])
    private static let metadataCollectionsFailed = Counter(label: "agent_metadata_collections_total", dimensions: [("result", "error")])
    /// `BatchUpdateMetadata` calls by outcome.
    private static let metadataReportsOK = Counter(label: "agent_metadata_reports_total", dimensions: [("result", "ok")])
    private static let metadataReportsFailed = Counter(label: "agent_metadata_reports_total", dimensions: [("result", "error")])
    /// `UpdateStats` calls (the interval probe included) by outcome.
    private static let statsReportsOK = Counter(label: "agent_stats_reports_total", dimensions: [("result", "ok")])
    private static let statsReportsFailed = Counter(label: "agent_stats_reports_total", dimensions: [("result", "error")])
    /// The stats report interval in use, in seconds (the control plane's answer, clamped).
    private static let statsReportInterval = Gauge(label: "agent_stats_report_interval_seconds")

    static func appHealthCheck(healthy: Bool) { (healthy ? appHealthChecksHealthy : appHealthChecksFailed).increment() }
    static func appHealthReport(ok: Bool) { (ok ? appHealthReportsOK : appHealthReportsFailed).increment() }
    static func metadataCollection(ok: Bool) { (ok ? metadataCollectionsOK : metadataCollectionsFailed).increment() }
    static func metadataReport(ok: Bool) { (ok ? metadataReportsOK : metadataReportsFailed).increment() }
    static func statsReport(ok: Bool) { (ok ? statsReportsOK : statsReportsFailed).increment() }
    static func statsInterval(_ interval: Duration) { statsReportInterval.record(interval / .seconds(1)) }
}
