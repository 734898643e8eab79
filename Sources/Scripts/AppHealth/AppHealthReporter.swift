import AgentCore
import AgentProto
import FoundationEssentials
import Logging
import Synchronization

/// Checks the manifest's apps and reports their health upward on one connected session.
///
/// - Nothing runs when no app is tracked (every app `DISABLED`): ``run(on:)`` returns at once.
/// - Per checked app (URL, interval > 0, threshold > 0) one loop: the first check one
///   interval after start, then every interval; each check is ``AppHealthProbe/check(_:timeout:)``
///   with `interval − 1 ms`; the outcome goes into an ``AppHealthTracker``.
/// - Every second the states are compared with the last reported copy; on any change one
///   `BatchUpdateAppHealths` carries every tracked app. The copy is updated before the call,
///   so a failed call is logged, never retried (the reference's behaviour): the next change
///   reports again.
/// - Each run starts from the manifest's `health` values, so every new session starts over
///   (also the reference's behaviour).
///
/// Memory: one tracker entry per tracked app and one probe in flight per checked app.
public struct AppHealthReporter: Sendable {
    static let rpc = "/coder.agent.v2.Agent/BatchUpdateAppHealths"

    /// The manifest's apps (all of them: the tracker picks).
    public let apps: [ManifestApp]
    private let probe: AppHealthProbe
    private let logger: Logger
    private let reportPeriod: Duration

    /// - Parameters:
    ///   - apps: the manifest's apps, as this session's manifest lists them.
    ///   - probe: what makes one check (a shared NIO group by default).
    ///   - reportPeriod: how often states are compared with the last report (the reference's 1 s).
    public init(apps: [ManifestApp], probe: AppHealthProbe = AppHealthProbe(), logger: Logger, reportPeriod: Duration = .seconds(1)) {
        self.apps = apps
        self.probe = probe
        self.logger = logger
        self.reportPeriod = reportPeriod
    }

    /// The tracker one run shares between its check loops and its report loop.
    private final class RunState: Sendable {
        let tracker: Mutex<AppHealthTracker>
        init(_ tracker: AppHealthTracker) { self.tracker = Mutex(tracker) }
    }

    /// Checks and reports until the task is cancelled (then returns); returns at once when
    /// no app is tracked. A failed report is logged, not thrown.
    public func run(on session: any UpwardSession) async throws {
        let initial = AppHealthTracker(apps: apps)
        guard !initial.isEmpty else { return }
        let state = RunState(initial)
        let checked = AppHealthTracker.checkedApps(apps)
        do {
            try await withThrowingDiscardingTaskGroup { group in
                for app in checked {
                    group.addTask { try await checkLoop(app, state: state) }
                }
                group.addTask { try await reportLoop(session, state: state) }
            }
        } catch is CancellationError {
            return
        }
    }

    /// Checks `app` every interval, the first one interval from now.
    private func checkLoop(_ app: ManifestApp, state: RunState) async throws {
        let interval = app.healthcheckInterval
        let timeout = max(interval - .milliseconds(1), .milliseconds(1))
        var ticks = TickSchedule(period: interval, first: interval)
        while true {
            _ = try await ticks.wait()
            let outcome = await probe.check(app.healthcheckURL, timeout: timeout)
            try Task.checkCancellation()
            ReportMetrics.appHealthCheck(healthy: outcome.isHealthy)
            let (before, after) = state.tracker.withLock { tracker in
                (tracker.health(of: app.id), tracker.record(app.id, healthy: outcome.isHealthy))
            }
            if before != after {
                logger.debug(
                    "app health changed",
                    metadata: ["app": "\(app.slug)", "health": "\(String(describing: after))", "check": "\(outcome)"])
            }
        }
    }

    /// Reports every tracked app whenever a state changed since the last report.
    private func reportLoop(_ session: any UpwardSession, state: RunState) async throws {
        var ticks = TickSchedule(period: reportPeriod, first: reportPeriod)
        while true {
            _ = try await ticks.wait()
            guard let updates = state.tracker.withLock({ $0.takeChanges() }) else { continue }
            var request = Coder_Agent_V2_BatchUpdateAppHealthRequest()
            request.updates = updates.map { update in
                var item = Coder_Agent_V2_BatchUpdateAppHealthRequest.HealthUpdate()
                item.id = Data(update.id)
                item.health = Coder_Agent_V2_AppHealth(rawValue: update.health.rawValue) ?? .unspecified
                return item
            }
            do {
                _ = try await UpwardCall.unary(session, Self.rpc, request)
                ReportMetrics.appHealthReport(ok: true)
            } catch {
                try Task.checkCancellation()
                ReportMetrics.appHealthReport(ok: false)
                logger.warning("app health report failed; not retried", metadata: ["error": "\(error)"])
            }
        }
    }
}
