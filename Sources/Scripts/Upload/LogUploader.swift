import AgentCore
import CoreMetrics
import AgentProto
import FoundationEssentials
import Logging
import SwiftProtobuf

/// Sends the journal's log lines with `BatchCreateLogs` on one connected session, oldest
/// first: one log source per request, Σ(len + 21) ≤ 1 MiB, paced per source as the
/// reference (at once after a quiet second, else once a second, at once for a full batch,
/// a flush or shutdown). A line leaves the journal only once the control plane has
/// acknowledged it; a transport failure ends this session's upload and the same lines go
/// again on the next one; an error answer sends them again on this one, after a wait.
struct LogUploader: Sendable {
    static let rpc = "/coder.agent.v2.Agent/BatchCreateLogs"
    /// Records read per peek (the batch budget then decides what goes).
    static let peekRecords = 50_000
    /// A refused batch goes again after this wait, doubling up to ``maxRetry``.
    static let firstRetry: Duration = .seconds(1)
    static let maxRetry: Duration = .seconds(10)

    let uploads: ScriptUploads
    let metrics: ScriptsMetrics
    let logger: Logger
    /// Shutdown is under way: no pacing.
    let shuttingDown: @Sendable () -> Bool

    func run(on session: any UpwardSession) async throws {
        // Memory: one planner per log source seen (the manifest's scripts, a handful).
        var planners: [[UInt8]: LogBatchPlanner] = [:]
        /// The wait before a batch the control plane answered with an error goes again.
        var refused = Backoff(initial: Self.firstRetry, maximum: Self.maxRetry, jitter: .none)
        while !Task.isCancelled {
            if uploads.logsDisabled {
                // For the life of the process (the reference's rule); reports still go.
                try await Task.sleep(for: .seconds(3600))
                continue
            }
            guard let batch = uploads.logs.peek(maxRecords: Self.peekRecords, maxBytes: LogBatching.budgetBytes + Self.peekRecords * LogBatching.overheadPerLog) else {
                await uploads.logs.waitForRecords()
                continue
            }
            // The longest prefix of one source within the budget; a record that is not a
            // version-1 LogRecord (another version's journal) is skipped.
            var (count, cost) = LogBatching.sameSourcePrefix(batch.records)
            guard count > 0 else {
                uploads.logs.acknowledge(through: batch.position(after: 1))
                metrics.logLinesRejected.increment()
                continue
            }
            let source = Array(batch.records[0][10..<26])
            // More lines wait behind this batch: it cannot grow by waiting, so it is full.
            if uploads.logs.pendingRecords > count { cost = LogBatching.budgetBytes }
            let now = ContinuousClock.now
            let decision = (planners[source] ?? LogBatchPlanner()).decision(
                now: now, pendingBytes: cost, flushRequested: uploads.flushRequested, shuttingDown: shuttingDown())
            if case .wait(let until) = decision {
                await waitUntil(until)
                continue
            }
            let bytes = LogRequestEncoding.request(batch.records[0..<count])
            do {
                let answer = try await session.unary(Self.rpc, request: bytes, maxMessageBytes: 4096)
                let response = try Coder_Agent_V2_BatchCreateLogsResponse(serializedBytes: answer)
                uploads.logs.acknowledge(through: batch.position(after: count))
                refused.reset()
                if uploads.logs.pendingRecords == 0 {
                    uploads.flushDone()
                    // Every queue is empty: the next line of any source starts a new one and
                    // goes at once (light output is not held for the pacing second).
                    planners = [:]
                } else {
                    planners[source, default: LogBatchPlanner()].sent(at: now)
                }
                metrics.logLinesSent.increment(by: count)
                metrics.logBatchesSent.increment()
                if response.logLimitExceeded {
                    logger.warning("server log limit exceeded; logs truncated (the script log files keep everything)")
                    uploads.disableLogs()
                }
            } catch let error as UpwardStreamError {
                guard case .remote(_, let message) = error.kind else { throw error }
                // An error answer (its database down for a moment): the lines stay queued and
                // go again on this connection after 1 s, doubling up to 10 s, where the
                // reference drops the connection to send them again after the reconnect.
                metrics.logBatchesRefused.increment()
                let wait = refused.failed()
                logger.warning(
                    "control plane refused script logs; sending them again", metadata: ["error": "\(message)", "lines": "\(count)", "in": "\(wait)"])
                try await Task.sleep(for: wait)
            }
            uploads.wake()
        }
    }

    /// Sleeps until `instant`, or less when new lines or a flush arrive.
    private func waitUntil(_ instant: ContinuousClock.Instant) async {
        await sleep(until: instant, clock: .continuous, orUntil: { [uploads] in await uploads.waitForFlush() })
    }
}

/// Sends the journal's `ScriptCompleted` reports in order on one connected session. A report
/// the control plane refuses is dropped (counted, logged); a transport failure ends this
/// session's upload and the report goes again on the next one.
struct ReportUploader: Sendable {
    static let rpc = "/coder.agent.v2.Agent/ScriptCompleted"

    let uploads: ScriptUploads
    let metrics: ScriptsMetrics
    let logger: Logger

    func run(on session: any UpwardSession) async throws {
        while !Task.isCancelled {
            guard let batch = uploads.reports.peek(maxRecords: 1, maxBytes: 64 << 10) else {
                await uploads.reports.waitForRecords()
                continue
            }
            do {
                _ = try await session.unary(Self.rpc, request: batch.records[0], maxMessageBytes: 4096)
                metrics.reportsSent.increment()
            } catch {
                switch error.kind {
                case .remote(_, let message):
                    metrics.reportsRejected.increment()
                    logger.warning("control plane rejected a script completion report", metadata: ["error": "\(message)"])
                case .unsupported:
                    // An older control plane (API < 2.3) has no ScriptCompleted.
                    metrics.reportsRejected.increment()
                default:
                    throw error
                }
            }
            uploads.reports.acknowledge(through: batch.end)
            uploads.wake()
        }
    }
}
