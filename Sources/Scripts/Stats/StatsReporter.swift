import AgentCore
import AgentProto
import Logging
import SwiftProtobuf
import Synchronization

/// Reports the agent's stats upward on one connected session.
///
/// - First `UpdateStatsRequest{}` without `stats`: the probe, whose answer carries
///   `report_interval` (30 s when absent or not positive; clamped to 1 s ... 1 h). A probe
///   that fails is logged and the default interval used.
/// - Then every interval one `UpdateStats` with `stats` present: the tunnel's traffic
///   window (``TunnelTraffic/takeWindow()``, taken right before the send, so nothing is
///   counted twice), the running sessions by app name (``SessionCounts``: API 2.11's
///   `session_counts`; on a 2.10 session the four fixed fields instead, other names left out),
///   `connection_median_latency_ms = -1` (it pings no peers), and the agent's counters and
///   gauges (``MetricsSnapshotSource/samples()``). Every answer's `report_interval` is
///   applied when it differs.
/// - A report that fails (error, no answer within 30 s, session gone) is logged; its window
///   is kept and merged into the next report this reporter makes, on this session or the
///   next one (the traffic is not lost; a flow active in both windows then counts twice in
///   `connection_count`, since a window keeps flow counts, not flows). A report whose call
///   succeeded but whose answer was lost is counted again.
///
/// Memory: one carried window (a few counters per protocol name) and one request.
public final class StatsReporter: Sendable {
    static let rpc = "/coder.agent.v2.Agent/UpdateStats"
    /// When the control plane names no interval (coderd's own default).
    public static let defaultInterval: Duration = .seconds(30)
    public static let minimumInterval: Duration = .seconds(1)
    public static let maximumInterval: Duration = .seconds(3600)

    private let traffic: TunnelTraffic
    private let metrics: any MetricsSnapshotSource
    /// Running sessions by kind (the SSH server and the reconnecting PTY count them).
    private let sessions: SessionCounts
    private let logger: Logger
    /// Traffic of reports that failed, for the next one.
    private let carried = Mutex<TunnelTraffic.Window?>(nil)

    /// - Parameters:
    ///   - traffic: the tunnel's traffic (the tailnet records it; zero without a tunnel).
    ///   - metrics: the agent's counters and gauges, forwarded in `metrics`.
    public init(
        traffic: TunnelTraffic, metrics: any MetricsSnapshotSource = NoMetricsSnapshot(), sessions: SessionCounts = SessionCounts(),
        logger: Logger
    ) {
        self.sessions = sessions
        self.traffic = traffic
        self.metrics = metrics
        self.logger = logger
    }

    /// Probes, then reports every interval, until the task is cancelled (then returns).
    public func run(on session: any UpwardSession) async throws {
        do {
            var interval = Self.defaultInterval
            do {
                let answer = try await UpwardCall.unary(session, Self.rpc, Coder_Agent_V2_UpdateStatsRequest())
                ReportMetrics.statsReport(ok: true)
                interval = Self.interval(from: try Coder_Agent_V2_UpdateStatsResponse(serializedBytes: answer))
            } catch {
                try Task.checkCancellation()
                ReportMetrics.statsReport(ok: false)
                logger.warning("stats interval probe failed; reporting every 30 s", metadata: ["error": "\(error)"])
            }
            ReportMetrics.statsInterval(interval)
            while true {
                try await Task.sleep(for: interval)
                let window = takeWindow()
                var request = Coder_Agent_V2_UpdateStatsRequest()
                request.stats = Self.stats(window, samples: metrics.samples(), sessions: sessions, version: session.apiVersion)
                do {
                    let answer = try await UpwardCall.unary(session, Self.rpc, request)
                    ReportMetrics.statsReport(ok: true)
                    let next = Self.interval(from: try Coder_Agent_V2_UpdateStatsResponse(serializedBytes: answer))
                    if next != interval {
                        logger.debug("stats report interval changed", metadata: ["interval": "\(next)"])
                        interval = next
                        ReportMetrics.statsInterval(interval)
                    }
                } catch {
                    carry(window)
                    try Task.checkCancellation()
                    ReportMetrics.statsReport(ok: false)
                    logger.warning("stats report failed; its traffic goes with the next one", metadata: ["error": "\(error)"])
                }
            }
        } catch is CancellationError {
            return
        }
    }

    /// The tunnel's window since the last report, plus what failed reports left.
    private func takeWindow() -> TunnelTraffic.Window {
        let fresh = traffic.takeWindow()
        guard
            let old = carried.withLock({ window in
                defer { window = nil }; return window
            })
        else { return fresh }
        return Self.merged(old, fresh)
    }

    /// Keeps `window` for the next report.
    private func carry(_ window: TunnelTraffic.Window) {
        carried.withLock { carried in carried = carried.map { Self.merged($0, window) } ?? window }
    }

    static func merged(_ a: TunnelTraffic.Window, _ b: TunnelTraffic.Window) -> TunnelTraffic.Window {
        var sum = a
        for (name, flows) in b.flowsByProtocol { sum.flowsByProtocol[name, default: 0] += flows }
        sum.received.packets += b.received.packets
        sum.received.bytes += b.received.bytes
        sum.sent.packets += b.sent.packets
        sum.sent.bytes += b.sent.bytes
        return sum
    }

    /// The interval an answer sets: 30 s when absent or not positive, else clamped to 1 s ... 1 h.
    static func interval(from response: Coder_Agent_V2_UpdateStatsResponse) -> Duration {
        guard response.hasReportInterval else { return defaultInterval }
        let wire = response.reportInterval
        let interval = Duration.seconds(wire.seconds) + .nanoseconds(Int64(wire.nanos))
        guard interval > .zero else { return defaultInterval }
        return min(max(interval, minimumInterval), maximumInterval)
    }

    /// One report's `stats`: `window`'s traffic (rx = into the workspace, tx = out of it),
    /// the sessions running now (as `version` carries them), no latency (-1), and `samples`
    /// as metrics.
    static func stats(
        _ window: TunnelTraffic.Window, samples: [MetricSample], sessions: SessionCounts? = nil, version: AgentAPIVersion = .current
    ) -> Coder_Agent_V2_Stats {
        var stats = Coder_Agent_V2_Stats()
        stats.connectionsByProto = window.flowsByProtocol
        stats.connectionCount = window.flows
        stats.rxPackets = window.received.packets
        stats.rxBytes = window.received.bytes
        stats.txPackets = window.sent.packets
        stats.txBytes = window.sent.bytes
        let counts = sessions?.snapshot() ?? [:]
        if version >= .v2_11 {
            stats.sessionCounts = counts
        } else {
            // A 2.10 control plane ignores the map (field 13): the fields it reads.
            stats.sessionCountSsh = counts[SessionCounts.Kind.ssh.name] ?? 0
            stats.sessionCountVscode = counts[SessionCounts.Kind.vscode.name] ?? 0
            stats.sessionCountJetbrains = counts[SessionCounts.Kind.jetbrains.name] ?? 0
            stats.sessionCountReconnectingPty = counts[SessionCounts.Kind.reconnectingPTY.name] ?? 0
        }
        stats.connectionMedianLatencyMs = -1
        stats.metrics = samples.map { sample in
            var metric = Coder_Agent_V2_Stats.Metric()
            metric.name = sample.name
            metric.type = sample.kind == .counter ? .counter : .gauge
            metric.value = sample.value
            metric.labels = sample.labels.map { label in
                var item = Coder_Agent_V2_Stats.Metric.Label()
                item.name = label.name
                item.value = label.value
                return item
            }
            return metric
        }
        return stats
    }
}
