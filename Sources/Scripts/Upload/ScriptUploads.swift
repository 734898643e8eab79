import AgentCore
import CoreMetrics
import AgentProto
import FoundationEssentials
import Synchronization
import SwiftProtobuf

/// What the scripts send upward, kept on disk until the control plane has acknowledged it:
/// log lines (``UploadJournal`` of ``LogRecord``s) and `ScriptCompleted` reports (a second
/// journal of serialized requests). Both survive control-plane outages and agent restarts,
/// and each upload moves a persisted cursor, so nothing is sent twice after a restart (but
/// for one batch when the agent dies between the control plane's answer and the cursor
/// write).
///
/// Disk: at most ``logCapacityBytes`` of unsent lines (about 1.5 million short lines; further
/// lines are refused and counted, the script's log file still has them) and
/// ``reportCapacityBytes`` of unsent reports (about 20,000 runs).
final class ScriptUploads: Sendable {
    static let logCapacityBytes = 64 << 20
    static let reportCapacityBytes = 2 << 20

    let logs: UploadJournal
    let reports: UploadJournal
    private let metrics: ScriptsMetrics
    /// Wakes the log uploader's pacing wait (one waiting task: the uploader).
    private let flushSignal = WorkSignal()
    /// Wakes ``waitDrained()`` after an acknowledgement (one waiting task: the session).
    private let drainSignal = WorkSignal()

    private struct State {
        /// The control plane said the agent's log limit is exceeded: no more lines are kept
        /// or sent for the life of the process (the reference's rule).
        var logsDisabled = false
        /// A run ended: its lines go out without the 1 s pacing.
        var flushRequested = false
    }
    private let state = Mutex(State())

    init(directory: String, metrics: ScriptsMetrics) throws {
        logs = try UploadJournal(directory: directory, name: "logs", capacityBytes: Self.logCapacityBytes)
        reports = try UploadJournal(directory: directory, name: "script-completed", capacityBytes: Self.reportCapacityBytes)
        self.metrics = metrics
    }

    var logsDisabled: Bool { state.withLock { $0.logsDisabled } }

    /// Keeps encoded ``LogRecord``s for upload (one write for all of them).
    func appendLogs(_ records: [[UInt8]]) {
        guard !records.isEmpty, !logsDisabled else { return }
        let accepted = logs.append(records)
        metrics.logLinesQueued.increment(by: accepted)
        if accepted < records.count { metrics.logLinesRefused.increment(by: records.count - accepted) }
    }

    /// One line of the agent's own about a script (a setup error), on the script's source.
    func note(_ text: String, sourceID: [UInt8], level: UInt8 = LogRecord.levelError) {
        let record = LogRecord(
            sourceID: sourceID, level: level, createdAt: Self.nanoseconds(Date()), output: LogSanitizer.sanitize(Array(text.utf8)))
        appendLogs([record.encode()])
    }

    /// Keeps a `ScriptCompleted` report for upload.
    func report(_ exit: ScriptExit, scriptID: [UInt8], stage: Coder_Agent_V2_Timing.Stage) {
        var timing = Coder_Agent_V2_Timing()
        timing.scriptID = Data(scriptID)
        timing.start = Google_Protobuf_Timestamp(date: exit.start)
        timing.end = Google_Protobuf_Timestamp(date: max(exit.end, exit.start))
        timing.exitCode = exit.exitCode
        timing.stage = stage
        timing.status = Coder_Agent_V2_Timing.Status(rawValue: exit.status.rawValue) ?? .exitFailure
        var request = Coder_Agent_V2_WorkspaceAgentScriptCompletedRequest()
        request.timing = timing
        guard let bytes: [UInt8] = try? request.serializedBytes() else { return }
        if !reports.append(bytes) { metrics.reportsRefused.increment() }
        requestFlush()
    }

    /// Asks the uploader to send what is queued without waiting for the 1 s pacing.
    func requestFlush() {
        state.withLock { $0.flushRequested = true }
        flushSignal.notify()
        wake()
    }

    /// Returns after a flush request (possibly an earlier one) or when cancelled.
    func waitForFlush() async {
        await flushSignal.wait()
    }

    /// A flush was requested and the lines queued before it may not all be sent yet: it
    /// holds until the journal has been empty once (``flushDone()``).
    var flushRequested: Bool { state.withLock { $0.flushRequested } }

    /// Everything queued is sent: the flush request is met.
    func flushDone() {
        state.withLock { $0.flushRequested = false }
    }

    /// The control plane refused more logs: everything queued is dropped (the files have it).
    func disableLogs() {
        state.withLock { $0.logsDisabled = true }
        logs.discardAll()
        wake()
    }

    /// True when nothing is left to send (or logs can no longer be sent).
    var isDrained: Bool {
        reports.pendingRecords == 0 && (logs.pendingRecords == 0 || logsDisabled)
    }

    /// Called by the uploaders after each acknowledgement and by ``disableLogs()``.
    func wake() {
        drainSignal.notify()
    }

    /// Returns once ``isDrained`` (checked after every acknowledgement) or when cancelled.
    /// One waiter at a time: the session's drain at shutdown.
    func waitDrained() async {
        while !isDrained, !Task.isCancelled { await drainSignal.wait() }
    }

    static func nanoseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1_000_000_000).rounded())
    }
}
