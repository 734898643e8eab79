import AgentCore
import AgentProto
import CoreMetrics
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Logging
import ServiceLifecycle
import SwiftProtobuf
import Synchronization

/// Batches from every boundary connection, forwarded upward in arrival order, one request
/// at a time; consecutive batches of one session travel together. Enqueueing never blocks a reader. Beyond the reference:
/// batches that do not fit the memory queue (the reference's 100) go to a disk spool and
/// follow in order, so an outage or a slow control plane loses nothing up to the spool's
/// bound; a batch the control plane would refuse for size (over 1000 entries) is split; at
/// shutdown, what is still queued is spooled for the next start.
///
/// Memory: at most ``Configuration/memoryCapacity`` batches (each ≤ 32 KiB encoded) and
/// ``Configuration/memoryLogs`` entries in all (decoded, an entry costs far more than its
/// encoding: a 32 KiB batch of empty entries holds 16 000 of them), the rest spooled.
final class BoundaryForwarder: Service, Sendable {
    struct Configuration: Sendable {
        var memoryCapacity = 100
        /// Log entries held in memory in all (about 150 bytes each at the least).
        var memoryLogs = 20_000
        /// The control plane refuses larger batches.
        var maxLogsPerRequest = 1000
        /// How long shutdown keeps forwarding before spooling the rest.
        var shutdownFlush: Duration = .seconds(2)
    }

    typealias Request = Coder_Agent_V2_ReportBoundaryLogsRequest

    /// One of boundary's batches in memory, and the spool segment it was read from (settled
    /// there once forwarded or refused).
    private struct Queued {
        var request: Request
        var segment: Int64?
    }

    /// The request being forwarded (not yet acknowledged) and boundary's batches it carries
    /// (consecutive ones of one session are sent together; each is spooled on its own).
    private struct InFlight {
        var request: Request
        var parts: [Queued]
    }

    private struct State {
        var queue: [Queued] = []
        /// Log entries of the queued batches (at most 100 batches to count).
        var queuedLogs: Int { queue.reduce(0) { $0 + $1.request.logs.count } }
        var spool: BoundarySpool?
        var inFlight: InFlight?
        var stopped = false
        /// Batches dropped by the forwarder, by reason (also in the metrics; kept for tests).
        var dropped: [String: Int] = [:]
        /// Batches handed to ``enqueue(_:)`` so far, whatever became of them.
        var enqueued = 0
        /// Of those, batches written to the spool (some may have been taken back since).
        var spooled = 0
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
        BoundaryMetrics.batchesReceived.increment()
        let dropped: String? = state.withLock { s in
            s.enqueued += 1
            let spoolHasItems = !(s.spool?.isEmpty ?? true)
            if !spoolHasItems && s.queue.count < configuration.memoryCapacity && !s.stopped
                && s.queuedLogs + entries <= configuration.memoryLogs
            {
                s.queue.append(Queued(request: request))
                BoundaryMetrics.queued.record(s.queue.count)
                return nil
            }
            guard let spool = s.spool else {
                s.dropped["buffer_full", default: 0] += 1
                return "buffer_full"
            }
            guard let bytes: [UInt8] = try? request.serializedBytes(), spool.append(bytes) else {
                s.dropped["spool_full", default: 0] += 1
                return "spool_full"
            }
            s.spooled += 1
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

    /// Batches dropped so far, by reason.
    var droppedBatches: [String: Int] { state.withLock { $0.dropped } }

    /// Batches waiting in memory (at most ``Configuration/memoryCapacity``).
    var queuedBatches: Int { state.withLock { $0.queue.count } }

    /// Batches handed over by the socket server so far (diagnostics and tests).
    var enqueuedBatches: Int { state.withLock { $0.enqueued } }

    /// Where the batches read so far went, counted at one instant (under the lock).
    struct Accounting: Equatable, Sendable {
        /// Handed to ``enqueue(_:)``.
        var received: Int
        /// Being forwarded, and waiting in memory.
        var inFlight: Int
        var queued: Int
        /// Written to the spool by ``enqueue(_:)`` (including any taken back since).
        var spooled: Int
        /// Dropped, every reason.
        var dropped: Int
    }

    /// Until anything is forwarded or taken back from the spool, `received == inFlight +
    /// queued + spooled + dropped`: every batch read is somewhere or counted (tests).
    var accounting: Accounting {
        state.withLock { s in
            Accounting(
                received: s.enqueued, inFlight: s.inFlight?.parts.count ?? 0, queued: s.queue.count,
                spooled: s.spooled, dropped: s.dropped.values.reduce(0, +))
        }
    }

    /// Nothing in flight, queued or spooled: everything read so far was forwarded or dropped.
    var isDrained: Bool {
        state.withLock { $0.inFlight == nil && $0.queue.isEmpty && ($0.spool?.isEmpty ?? true) }
    }

    /// The next request: memory first (it is older than anything spooled; an empty memory
    /// queue is refilled from the spool's oldest records), merging the queued batches of the
    /// first batch's session, in their order, up to the control plane's 1000 logs. Order is
    /// kept per session (what boundary numbers); batches of different sessions may pass each
    /// other. The reference sends one RPC per batch of 10: merging is what keeps several
    /// busy boundaries from outrunning the forwarder.
    private func next() -> (request: Request, batches: Int)? {
        state.withLock { s in
            if let inFlight = s.inFlight { return (inFlight.request, inFlight.parts.count) }
            if s.queue.isEmpty, let spool = s.spool {
                var logs = 0
                // At least one batch, so that a batch over the entry bound still moves.
                while s.queue.count < configuration.memoryCapacity, s.queue.isEmpty || logs < configuration.memoryLogs,
                    let (bytes, segment) = spool.next()
                {
                    if let request = try? Request(serializedBytes: bytes) {
                        logs += request.logs.count
                        s.queue.append(Queued(request: request, segment: segment))
                    } else {
                        spool.settle(segment: segment)
                    }
                }
                BoundaryMetrics.spoolBytes.record(spool.totalBytes)
            }
            guard !s.queue.isEmpty else { return nil }
            let first = s.queue.removeFirst()
            var merged = first.request
            var parts = [first]
            var index = 0
            while index < s.queue.count && merged.logs.count < configuration.maxLogsPerRequest {
                let candidate = s.queue[index]
                if candidate.request.sessionID == merged.sessionID, candidate.request.confinedProcessName == merged.confinedProcessName,
                    merged.logs.count + candidate.request.logs.count <= configuration.maxLogsPerRequest
                {
                    merged.logs += candidate.request.logs
                    parts.append(candidate)
                    s.queue.remove(at: index)
                } else {
                    index += 1
                }
            }
            BoundaryMetrics.queued.record(s.queue.count)
            s.inFlight = InFlight(request: merged, parts: parts)
            return (merged, parts.count)
        }
    }

    /// The request in flight has its fate (forwarded or refused): its batches read from the
    /// spool are settled there.
    private func settleInFlight() {
        state.withLock { s in
            guard let inFlight = s.inFlight else { return }
            s.inFlight = nil
            guard let spool = s.spool else { return }
            for part in inFlight.parts { if let segment = part.segment { spool.settle(segment: segment) } }
            BoundaryMetrics.spoolBytes.record(spool.totalBytes)
        }
    }

    func run() async throws {
        await withShutdownHandler {
            await forward()
        } onShutdown: {
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
            guard let (request, batches) = next() else {
                if isStopping { break }
                await work.wait()
                continue
            }
            guard await send(request, batches: batches, until: flushDeadline) else { break }
            settleInFlight()
        }
        spoolRemaining()
    }

    /// Sends one batch (split at the control plane's limit) and waits for each part's fate;
    /// false when shutdown came first (the batch stays in flight, to be spooled).
    private func send(_ request: Request, batches: Int, until deadline: ContinuousClock.Instant?) async -> Bool {
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
            var outcome = await wait(receipt, until: deadline)
            // Shutdown came first: taken back from the upward queue, the part is spooled and
            // sent only by the next start. One already on its way (or whose outbox cannot
            // give it back) is spooled too: it may then arrive twice, never not at all.
            if outcome == nil, !receipt.withdraw() { outcome = receipt.outcome }
            guard let outcome, outcome != .abandoned else {
                dropSent(logs: outcomes.count * configuration.maxLogsPerRequest)
                return false
            }
            outcomes.append(outcome)
        }
        if let refused = outcomes.first(where: { if case .rejected = $0 { true } else if case .dropped = $0 { true } else { false } }) {
            logger.warning("control plane refused boundary logs", metadata: ["error": "\(refused)", "log_count": "\(batch.entries.count)"])
            BoundaryMetrics.batchesDropped("forward_failed").increment(by: Int64(batches))
            BoundaryMetrics.logsDropped("forward_failed").increment(by: Int64(batch.entries.count))
        } else if outcomes.allSatisfy({ $0 == .logged }) {
            BoundaryMetrics.batchesLogged.increment(by: Int64(batches))
        } else {
            BoundaryMetrics.batchesForwarded.increment(by: Int64(batches))
        }
        return true
    }

    /// Shutdown came between the parts of a split request: the parts that went (its first
    /// `logs` logs) are taken out of the batches in flight, which are spooled, so they do not
    /// arrive twice.
    private func dropSent(logs: Int) {
        guard logs > 0 else { return }
        state.withLock { s in
            guard var inFlight = s.inFlight else { return }
            var left = logs
            for index in inFlight.parts.indices where left > 0 {
                let taken = min(left, inFlight.parts[index].request.logs.count)
                inFlight.parts[index].request.logs.removeFirst(taken)
                left -= taken
            }
            inFlight.parts.removeAll { $0.request.logs.isEmpty }
            s.inFlight = inFlight
        }
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

    /// At shutdown: boundary's batches in flight and in the memory queue go to the spool, each
    /// as it came (a merged request could pass a record's limit), ahead of what it holds.
    private func spoolRemaining() {
        let (count, lost) = state.withLock { s -> (Int, Int) in
            s.stopped = true
            // Batches read from the spool first (they are older than every batch only in
            // memory, and were safe on disk: if room runs out, memory's are the ones lost),
            // each group in its order, so a session's order holds.
            let held = (s.inFlight?.parts ?? []) + s.queue
            let remaining = held.filter { $0.segment != nil } + held.filter { $0.segment == nil }
            s.inFlight = nil
            s.queue = []
            BoundaryMetrics.queued.record(0)
            var written = 0
            if let spool = s.spool {
                let payloads = remaining.compactMap { try? $0.request.serializedBytes() as [UInt8] }
                // A failed write drops nothing: what was read from the spool is still there.
                written = spool.checkpoint(prepending: payloads) ?? remaining.count { $0.segment != nil }
                BoundaryMetrics.spoolBytes.record(spool.totalBytes)
            }
            // Counted in ``droppedBatches`` too, not only in the metrics.
            if remaining.count > written { s.dropped["spool_full", default: 0] += remaining.count - written }
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
                    allowed: log.allowed, time: log.hasTime ? .init(seconds: log.time.seconds, nanos: log.time.nanos) : nil,
                    httpRequest: Self.httpRequest(log),
                    sequenceNumber: log.sequenceNumber)
            },
            sessionID: request.sessionID, confinedProcessName: request.confinedProcessName)
    }
}
