import AgentCore
import AgentProto
import CoreMetrics
import Foundation
import Logging
import ServiceLifecycle
import SwiftProtobuf
import Synchronization

/// Batches from every boundary connection, forwarded upward in arrival order, one at a time
/// (spec boundary-logs §3.1). Enqueueing never blocks a reader. Beyond the reference:
/// batches that do not fit the memory queue (the reference's 100) go to a disk spool and
/// follow in order, so an outage or a slow control plane loses nothing up to the spool's
/// bound; a batch the control plane would refuse for size (over 1000 entries) is split; at
/// shutdown, what is still queued is spooled for the next start.
///
/// Memory: at most ``Configuration/memoryCapacity`` batches (each ≤ 32 KiB encoded).
final class BoundaryForwarder: Service, Sendable {
    struct Configuration: Sendable {
        var memoryCapacity = 100
        /// The control plane refuses larger batches.
        var maxLogsPerRequest = 1000
        /// How long shutdown keeps forwarding before spooling the rest.
        var shutdownFlush: Duration = .seconds(2)
    }

    typealias Request = Coder_Agent_V2_ReportBoundaryLogsRequest

    private struct State {
        var queue: [Request] = []
        var spool: BoundarySpool?
        /// The batch being forwarded (not yet acknowledged).
        var inFlight: Request?
        var stopped = false
    }

    let configuration: Configuration
    private let upward: any UpwardSink
    private let state: Mutex<State>
    private let work = WorkSignal()
    private let stopping = Latch()
    private let logger = Logger(label: "workspace-agent.boundary")

    init(configuration: Configuration = .init(), upward: any UpwardSink, spool: sending BoundarySpool?) {
        self.configuration = configuration
        self.upward = upward
        BoundaryMetrics.spoolBytes.record(spool?.totalBytes ?? 0)
        state = Mutex(State(spool: spool))
    }

    /// Takes one decoded batch; never waits.
    func enqueue(_ request: Request) {
        let entries = request.logs.count
        let dropped: String? = state.withLock { s in
            let spoolHasItems = !(s.spool?.isEmpty ?? true)
            if !spoolHasItems && s.queue.count < configuration.memoryCapacity && !s.stopped {
                s.queue.append(request)
                BoundaryMetrics.queued.record(s.queue.count)
                return nil
            }
            guard let spool = s.spool else { return "buffer_full" }
            guard let bytes: [UInt8] = try? request.serializedBytes(), spool.append(bytes) else { return "spool_full" }
            BoundaryMetrics.batchesSpooled.increment()
            BoundaryMetrics.spoolBytes.record(spool.totalBytes)
            return nil
        }
        if let dropped {
            logger.warning("dropping boundary logs", metadata: ["reason": "\(dropped)", "log_count": "\(entries)"])
            BoundaryMetrics.batchesDropped(dropped).increment()
            BoundaryMetrics.logsDropped(dropped).increment(by: Int64(entries))
        }
        work.notify()
    }

    /// The next batch: memory first (it is older than anything spooled), then the spool.
    private func next() -> Request? {
        state.withLock { s in
            if let request = s.inFlight { return request }
            var request: Request?
            if !s.queue.isEmpty {
                request = s.queue.removeFirst()
                BoundaryMetrics.queued.record(s.queue.count)
            } else if let spool = s.spool {
                while request == nil, let bytes = spool.next() {
                    request = try? Request(serializedBytes: bytes)
                }
                BoundaryMetrics.spoolBytes.record(spool.totalBytes)
            }
            s.inFlight = request
            return request
        }
    }

    func run() async throws {
        await withGracefulShutdownHandler {
            await forward()
        } onGracefulShutdown: {
            self.stopping.open()
            self.work.notify()
        }
    }

    private var isStopping: Bool { stopping.isOpen }

    private func forward() async {
        var flushDeadline: ContinuousClock.Instant?
        while true {
            if isStopping && flushDeadline == nil { flushDeadline = .now + configuration.shutdownFlush }
            if let flushDeadline, ContinuousClock.now >= flushDeadline || !upward.isConnected { break }
            guard let request = next() else {
                if isStopping { break }
                await work.wait()
                continue
            }
            guard await send(request, until: flushDeadline) else { break }
            state.withLock { $0.inFlight = nil }
        }
        spoolRemaining()
    }

    /// Sends one batch (split at the control plane's limit) and waits for each part's fate;
    /// false when shutdown came first (the batch stays in flight, to be spooled).
    private func send(_ request: Request, until deadline: ContinuousClock.Instant?) async -> Bool {
        let batch = Self.batch(request)
        var parts: [BoundaryLogBatch] = []
        var start = 0
        repeat {
            let end = min(batch.entries.count, start + configuration.maxLogsPerRequest)
            parts.append(BoundaryLogBatch(entries: Array(batch.entries[start..<end]), sessionID: batch.sessionID, confinedProcessName: batch.confinedProcessName))
            start = end
        } while start < batch.entries.count
        var outcomes: [UpwardOutcome] = []
        for part in parts {
            let receipt = upward.send(part)
            guard let outcome = await wait(receipt, until: deadline), outcome != .abandoned else { return false }
            outcomes.append(outcome)
        }
        if let refused = outcomes.first(where: { if case .rejected = $0 { true } else if case .dropped = $0 { true } else { false } }) {
            logger.warning("control plane refused boundary logs", metadata: ["error": "\(refused)", "log_count": "\(batch.entries.count)"])
            BoundaryMetrics.batchesDropped("forward_failed").increment()
            BoundaryMetrics.logsDropped("forward_failed").increment(by: Int64(batch.entries.count))
        } else if outcomes.allSatisfy({ $0 == .logged }) {
            BoundaryMetrics.batchesLogged.increment()
        } else {
            BoundaryMetrics.batchesForwarded.increment()
        }
        return true
    }

    /// The receipt's outcome, or nil once shutdown began and `deadline` passed (or shutdown
    /// began with no deadline yet: the flush deadline is set by the loop).
    private func wait(_ receipt: UpwardReceipt, until deadline: ContinuousClock.Instant?) async -> UpwardOutcome? {
        await withTaskGroup(of: UpwardOutcome?.self) { group in
            group.addTask { await receipt.wait() }
            group.addTask {
                await self.stopping.wait()
                let limit = deadline ?? (.now + self.configuration.shutdownFlush)
                try? await Task.sleep(until: limit, clock: .continuous)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? receipt.outcome
        }
    }

    /// At shutdown: the batch in flight and the memory queue go to the spool, ahead of it.
    private func spoolRemaining() {
        let (count, lost) = state.withLock { s -> (Int, Int) in
            s.stopped = true
            let remaining = (s.inFlight.map { [$0] } ?? []) + s.queue
            s.inFlight = nil
            s.queue = []
            BoundaryMetrics.queued.record(0)
            guard let spool = s.spool else { return (0, remaining.count) }
            let payloads = remaining.compactMap { try? $0.serializedBytes() as [UInt8] }
            let written = spool.prepend(payloads)
            BoundaryMetrics.spoolBytes.record(spool.totalBytes)
            return (written, remaining.count - written)
        }
        if count > 0 { logger.info("boundary logs spooled for the next start", metadata: ["batches": "\(count)"]) }
        if lost > 0 {
            logger.warning("boundary logs lost at shutdown (no spool room)", metadata: ["batches": "\(lost)"])
            BoundaryMetrics.batchesDropped("spool_full").increment(by: Int64(lost))
        }
    }

    private static func httpRequest(_ log: Coder_Agent_V2_BoundaryLog) -> BoundaryLogBatch.HTTPRequest? {
        guard case .httpRequest(let request)? = log.resource else { return nil }
        return BoundaryLogBatch.HTTPRequest(method: request.method, url: request.url, matchedRule: request.matchedRule)
    }

    /// AgentCore's shape of a request.
    static func batch(_ request: Request) -> BoundaryLogBatch {
        BoundaryLogBatch(
            entries: request.logs.map { log in
                BoundaryLogBatch.Entry(
                    allowed: log.allowed, time: log.hasTime ? log.time.date : nil,
                    httpRequest: Self.httpRequest(log),
                    sequenceNumber: log.sequenceNumber)
            },
            sessionID: request.sessionID, confinedProcessName: request.confinedProcessName)
    }
}
