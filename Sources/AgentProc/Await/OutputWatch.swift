import AgentCore
import CAgentSpawn
import LineRegex
import NIOCore
import Synchronization

/// What a line of output must contain for an await to end.
public enum LineCondition: Sendable {
    /// A regular expression in RE2 syntax (linear-time matching, no backreferences).
    case pattern(LineRegex)
    /// Exact bytes (`until_literal=`).
    case literal([UInt8])

    /// True when `line` (without its newline) satisfies the condition.
    func matches(_ line: UnsafeRawBufferPointer) -> Bool {
        switch self {
        case .pattern(let regex):
            return regex.matches(line)
        case .literal(let needle):
            if needle.isEmpty { return true }
            return needle.withUnsafeBytes { n in
                agent_memmem(line.baseAddress, line.count, n.baseAddress, n.count) != nil
            }
        }
    }
}

/// Matches one await's condition against a process's output, line by line, from a given
/// offset: first what was already written (read back from the spool by ``catchUp(_:at:)``),
/// then live output as the reactor writes it (``feed(_:at:)``, on the output path: no
/// polling). Lines are split at `\n`; one trailing `\r` is not part of the line.
///
/// The matching itself never runs on the thread that hands the bytes over: the reactor that
/// reads every process's output, and the event loop an await's request came on, only queue
/// them; a thread of ``pool`` matches them. A costly pattern (thousands of steps a byte)
/// over much output then delays only the awaits, never other processes' output, exits or
/// requests. An await that ends stops its matching at the next line.
///
/// A prompt does not end its line (`Continue? [y/N] `): the unfinished last line is tested
/// too after each write while it is at most ``promptBytes`` long, and at exit whatever its
/// length up to ``maxLineBytes``.
///
/// Memory: the unfinished line, at most ``maxLineBytes`` (a longer line is matched on its
/// first ``maxLineBytes``); output queued for matching (arriving during the catch-up, or
/// faster than it is matched), at most ``maxPendingBytes`` with ``chunkOverhead`` counted
/// for each chunk (beyond that the oldest queued output is dropped, since an await waits for
/// what comes next, and matching resumes at the next whole line).
/// Cost: each byte is matched once as part of its line, plus the re-tests of an unfinished
/// line, at most ``promptBudget`` bytes per line (output arriving a byte at a time would
/// otherwise re-test a growing prompt once per byte); then the line waits for its end.
public final class OutputWatch: Sendable {
    public static let maxLineBytes = 64 * 1024
    public static let promptBytes = 4096
    public static let promptBudget = 64 * 1024
    public static let maxPendingBytes = 1 << 20
    /// What a queued chunk costs beside its bytes (its array's header and the queue's slot),
    /// counted in ``maxPendingBytes``: a trickle of one-byte writes cannot queue a million.
    static let chunkOverhead = 64
    /// Where output is matched: two threads, each watch with at most one job queued or
    /// running (and its catch-up), so 4096 is more than ``ProcessManager/defaultMaxAwaits``
    /// needs twice over.
    static let pool = BlockingPool(name: "proc-match", threads: 2, maxQueued: 4096)
    /// Queued bytes matched per pool job at most (a line in progress is kept between jobs).
    static let sliceBytes = 64 * 1024

    /// A line that satisfied the condition and the offset of its first byte in the whole
    /// output.
    public struct Match: Sendable, Equatable {
        public var line: [UInt8]
        public var offset: UInt64
    }

    /// What the reactor and the await hand over, under `inbox`'s lock.
    private struct Inbox {
        /// Each with whether the bytes fed just before it (queued or dropped) ended a line.
        var chunks = CircularBuffer<(offset: UInt64, bytes: [UInt8], startsLine: Bool)>()
        /// Where the last bytes fed ended, and whether their last byte was a newline: a chunk
        /// fed right after dropped bytes that ended a line begins a line of its own.
        var fedEnd: UInt64?
        var fedEndedLine = false
        /// The queued chunks' cost: their bytes and ``OutputWatch/chunkOverhead`` each.
        var bytes = 0
        var catchingUp = true
        /// A drain is queued or running (at most one at a time).
        var draining = false
        /// The output is complete, and whether a drain has seen that.
        var ended = false
        var endSeen = false
        /// The unfinished last line was tested at the end (or the end found none).
        var endDone = false
        /// The end offset of the last bytes queued, and of the last bytes matched.
        var queuedEnd: UInt64 = 0
        var matchedEnd: UInt64 = 0
        /// Waiting in ``matchedSoFar()``, each until `matchedEnd` reaches its offset.
        var waiters: [(through: UInt64, continuation: CheckedContinuation<Void, Never>)] = []

        /// Nothing queued, nothing being matched, and an end seen is tested.
        var isIdle: Bool { !draining && chunks.isEmpty && (!ended || endSeen) }
        /// The bytes up to `offset` are matched, and the end's test is done if it came.
        func isMatched(through offset: UInt64) -> Bool { matchedEnd >= offset && (!ended || endDone) }
    }

    /// The line being assembled, touched only by the one drain (or catch-up) at a time.
    private struct Matcher {
        var line: [UInt8] = []
        var lineStart: UInt64
        /// The next offset expected (a different one means bytes were skipped).
        var position: UInt64
        /// Bytes of this line spent re-testing it unfinished.
        var promptSpent = 0
        /// Bytes were skipped: what follows up to the next newline is the rest of a line
        /// whose start was not seen, and is not matched as a line.
        var midLine = false
    }

    let condition: LineCondition
    private let inbox = Mutex(Inbox())
    private let matcher: Mutex<Matcher>
    private let result = Mutex<Match?>(nil)
    /// Set once matched or once the await ends: nothing more is matched.
    private let stopped = Atomic<Bool>(false)
    /// Matches on the caller's thread (the fuzz targets, which need the answer at once).
    private let inline: Bool
    /// Fired once a line matches.
    let matched = OneShotSignal()

    init(condition: LineCondition, from offset: UInt64, inline: Bool = false) {
        self.condition = condition
        self.inline = inline
        matcher = Mutex(Matcher(lineStart: offset, position: offset))
    }

    public var match: Match? { result.withLock { $0 } }

    /// Matched, or the await ended: nothing more is matched.
    var isStopped: Bool { stopped.load(ordering: .relaxed) }

    /// The await ended: matching stops at the next line.
    func stop() {
        stopped.store(true, ordering: .relaxed)
        wake(all: true)
    }

    /// Returns once the bytes queued so far are matched (or a line matched, or the await
    /// ended): the process's exit is reported after its last output, so an await must not
    /// answer `exited` while that output waits to be matched.
    func matchedSoFar() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = inbox.withLock { s -> Bool in
                if stopped.load(ordering: .relaxed) || s.isIdle || s.isMatched(through: s.queuedEnd) {
                    return true
                }
                s.waiters.append((s.queuedEnd, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Resumes the waiters whose bytes are matched (every one when `all`).
    private func wake(all: Bool) {
        let ready = inbox.withLock { s -> [CheckedContinuation<Void, Never>] in
            let idle = all || s.isIdle
            let matchedEnd = s.matchedEnd
            let endDone = !s.ended || s.endDone
            let isReady = { (through: UInt64) in idle || (through <= matchedEnd && endDone) }
            let ready = s.waiters.filter { isReady($0.through) }.map(\.continuation)
            s.waiters.removeAll { isReady($0.through) }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    /// Live output at `offset` (reactor thread): queued for matching. When more waits than
    /// ``maxPendingBytes`` allows, the oldest queued chunks make room (O(1) each).
    func feed(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) {
        guard !bytes.isEmpty, !stopped.load(ordering: .relaxed) else { return }
        // A chunk larger than the queue itself: its newest bytes.
        let room = Self.maxPendingBytes - Self.chunkOverhead
        let cut = max(0, bytes.count - room)
        let kept = UnsafeRawBufferPointer(rebasing: bytes[cut...])
        let keptOffset = offset + UInt64(cut)
        let drain = inbox.withLock { s -> Bool in
            var startsLine = s.fedEnd == offset && s.fedEndedLine
            if cut > 0 { startsLine = bytes[cut - 1] == UInt8(ascii: "\n") }
            s.fedEnd = offset + UInt64(bytes.count)
            s.fedEndedLine = bytes.last == UInt8(ascii: "\n")
            let cost = kept.count + Self.chunkOverhead
            while s.bytes + cost > Self.maxPendingBytes, let oldest = s.chunks.first {
                s.bytes -= oldest.bytes.count + Self.chunkOverhead
                s.chunks.removeFirst()
            }
            s.chunks.append((keptOffset, Array(kept), startsLine))
            s.bytes += cost
            s.queuedEnd = max(s.queuedEnd, s.fedEnd ?? 0)
            return startDrain(&s)
        }
        if drain { scheduleDrain() }
    }

    /// Matches `bytes` (read back from the spool, in order) while catching up: on the
    /// catch-up's own thread, never the reactor or an event loop.
    func catchUp(_ bytes: [UInt8], at offset: UInt64) {
        guard !stopped.load(ordering: .relaxed) else { return }
        let hit = matcher.withLock { m in bytes.withUnsafeBytes { scan(&m, $0, at: offset) } }
        if let hit { finish(hit) }
    }

    /// Ends the catch-up: what arrived meanwhile is matched (the part already read back is
    /// skipped), then live output as it comes.
    func endCatchUp() {
        let drain = inbox.withLock { s -> Bool in
            s.catchingUp = false
            return startDrain(&s)
        }
        if drain { scheduleDrain() }
    }

    /// The process's output is complete: the unfinished last line is tested whatever its
    /// length (after the catch-up, if one is under way).
    func outputEnded() {
        let drain = inbox.withLock { s -> Bool in
            s.ended = true
            return startDrain(&s)
        }
        if drain { scheduleDrain() }
    }

    /// Whether the caller must start a drain (none runs, the catch-up is over, there is work).
    private func startDrain(_ s: inout Inbox) -> Bool {
        guard !s.draining, !s.catchingUp, !s.chunks.isEmpty || (s.ended && !s.endSeen) else { return false }
        s.draining = true
        return true
    }

    private func scheduleDrain() {
        if inline {
            drain()
        } else if !Self.pool.submit({ [self] in drain() }) {
            // Cannot happen within the bounds above; the next bytes try again.
            inbox.withLock { $0.draining = false }
        }
    }

    /// Matches what is queued, at most ``sliceBytes`` a job: with more left the job queues
    /// itself again, behind the other watches' jobs, so a costly pattern over a fast writer
    /// takes turns on the pool's threads instead of holding one (until a line matched, the
    /// await ended or nothing is left).
    private func drain() {
        do {
            let work = inbox.withLock { s -> (chunks: [(offset: UInt64, bytes: [UInt8], startsLine: Bool)], ended: Bool, end: UInt64)? in
                guard !stopped.load(ordering: .relaxed), !s.chunks.isEmpty || (s.ended && !s.endSeen) else {
                    s.draining = false
                    return nil
                }
                var taken = 0
                var slice: [(offset: UInt64, bytes: [UInt8], startsLine: Bool)] = []
                while let next = s.chunks.first, slice.isEmpty || taken + next.bytes.count <= Self.sliceBytes {
                    taken += next.bytes.count
                    slice.append(s.chunks.removeFirst())
                }
                s.bytes -= taken + slice.count * Self.chunkOverhead
                // The end is tested after the last queued bytes.
                let ended = s.chunks.isEmpty && s.ended && !s.endSeen
                if ended { s.endSeen = true }
                let end = slice.last.map { $0.offset + UInt64($0.bytes.count) } ?? s.matchedEnd
                return (slice, ended, end)
            }
            guard let work else {
                wake(all: stopped.load(ordering: .relaxed))
                return
            }
            let hit = matcher.withLock { m -> Match? in
                for (offset, bytes, startsLine) in work.chunks {
                    let end = offset + UInt64(bytes.count)
                    guard end > m.position else { continue }
                    // What the catch-up read back already is skipped.
                    let skip = offset < m.position ? Int(m.position - offset) : 0
                    let hit = bytes.withUnsafeBytes {
                        scan(&m, UnsafeRawBufferPointer(rebasing: $0[skip...]), at: offset + UInt64(skip), startsLine: startsLine && skip == 0)
                    }
                    if let hit { return hit }
                }
                if work.ended, !stopped.load(ordering: .relaxed), !m.line.isEmpty { return test(m.line, at: m.lineStart) }
                return nil
            }
            if let hit {
                finish(hit)
                inbox.withLock { $0.draining = false }
                wake(all: true)
                return
            }
            let more = inbox.withLock { s -> Bool in
                s.matchedEnd = max(s.matchedEnd, work.end)
                if work.ended { s.endDone = true }
                let more = !stopped.load(ordering: .relaxed) && (!s.chunks.isEmpty || (s.ended && !s.endSeen))
                if !more { s.draining = false }
                return more
            }
            wake(all: false)
            if more { scheduleDrain() }
        }
    }

    private func finish(_ match: Match) {
        let first = result.withLock { r -> Bool in
            guard r == nil else { return false }
            r = match
            return true
        }
        guard first else { return }
        stopped.store(true, ordering: .relaxed)
        matched.fire()
    }

    /// Splits at newlines and tests each line; the first match. `startsLine`: the bytes
    /// before `offset` are known to end with a newline (so after a gap they begin a line).
    private func scan(_ m: inout Matcher, _ bytes: UnsafeRawBufferPointer, at offset: UInt64, startsLine: Bool = false) -> Match? {
        guard !bytes.isEmpty else { return nil }
        if offset != m.position {
            // A gap (bytes dropped before they were seen): the line under way is lost, and
            // what resumes is the rest of a line, not matched until its newline, unless the
            // skipped bytes ended a line.
            m.line.removeAll(keepingCapacity: true)
            m.promptSpent = 0
            m.midLine = !startsLine
            m.lineStart = offset
        }
        m.position = offset + UInt64(bytes.count)
        var start = 0
        if m.midLine {
            guard let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) else { return nil }
            start = newline - bytes.startIndex + 1
            m.lineStart = offset + UInt64(start)
            m.midLine = false
        }
        while start < bytes.count {
            if stopped.load(ordering: .relaxed) { return nil }
            let rest = UnsafeRawBufferPointer(rebasing: bytes[start...])
            guard let newline = rest.firstIndex(of: UInt8(ascii: "\n")) else {
                append(&m, rest)
                break
            }
            let end = newline - rest.startIndex + start
            append(&m, UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
            if let hit = test(m.line, at: m.lineStart) { return hit }
            m.line.removeAll(keepingCapacity: true)
            m.lineStart = offset + UInt64(end + 1)
            m.promptSpent = 0
            start = end + 1
        }
        if !m.line.isEmpty, m.line.count <= Self.promptBytes, m.promptSpent + m.line.count <= Self.promptBudget {
            m.promptSpent += m.line.count
            if let hit = test(m.line, at: m.lineStart) { return hit }
        }
        return nil
    }

    private func append(_ m: inout Matcher, _ part: UnsafeRawBufferPointer) {
        let room = Self.maxLineBytes - m.line.count
        if room > 0 { m.line.append(contentsOf: part.prefix(room)) }
    }

    private func test(_ line: [UInt8], at offset: UInt64) -> Match? {
        let body = line.last == UInt8(ascii: "\r") ? Array(line.dropLast()) : line
        let hit = body.withUnsafeBytes { condition.matches($0) }
        return hit ? Match(line: body, offset: offset) : nil
    }
}
