import CoreMetrics
import FoundationEssentials
import NIOCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One process started through the API: its identity, its head/tail output, its exit,
/// the requests waiting for that exit, and its live stream subscribers.
///
/// All mutable state sits behind one lock so that "state, then output" snapshots and
/// "snapshot, then subscribe" are atomic with respect to the reactor's writes.
public final class ManagedProcess: Sendable {
    /// Most concurrent stream subscribers per process.
    public static let maxSubscribers = 16

    public let id: String
    public let command: String
    /// The resolved working directory ("" means the agent's own).
    public let workdir: String
    public let background: Bool
    /// Canonical chat id, or nil for a process started without a chat.
    public let chatID: String?
    /// The chat's ancestors (`Coder-Ancestor-Chat-Ids`, canonical): the working directory is
    /// recorded for them too. Not kept across a restart (only a live exit records it).
    let ancestorChatIDs: [String]
    /// The shell's pid, which is also its process group id.
    public let pid: Int32
    /// Unix seconds.
    public let startedAtUnix: Int64
    /// Monotonic start time, for ordering ties deterministically.
    let startedAt: ContinuousClock.Instant
    /// The child's stdin when one was asked for (a pipe, or its terminal).
    let input: ProcessInput?
    /// Makes the process's output spool on its first output (a process that prints nothing
    /// makes no files); nil without spooling.
    private let spoolMaker: (@Sendable () -> OutputSpool?)?
    /// Restored after an agent restart from a record that said it was still running: the
    /// agent could not see how it ended.
    public let lost: Bool
    /// What the start asked for beyond the reference (kept for the durable record).
    let options: StartOptions

    struct Exit: Sendable {
        var status: ExitStatus
        var exitedAtUnix: Int64
        var exitedAt: ContinuousClock.Instant
    }

    private struct State {
        var output = HeadTail()
        var exit: Exit?
        var outputOpen = true
        var reactorToken: UInt64?
        var exitWaiters: [UInt64: @Sendable () -> Void] = [:]
        var subscribers: [UInt64: OutputSubscription] = [:]
        /// Awaits matching output as it is written (``OutputWatch``).
        var watches: [UInt64: OutputWatch] = [:]
        var nextID: UInt64 = 0
        /// The whole output on disk, addressed by offset (see ``spoolMaker``).
        var spool: OutputSpool?
        /// The spool was made, or making it failed or is no longer wanted.
        var spoolSettled = false
        /// Why the process's record could not be written (an agent restart will not know it).
        var recordFailure: String?
    }

    private let state = Mutex(State())
    /// Shared by every process of one manager: the bound on all subscribers together.
    private let budget: SubscriberBudget
    /// Told (on the reactor thread) once the process has exited and its state is final.
    private let exitObserver: (@Sendable (ManagedProcess) -> Void)?

    init(
        id: String, command: String, workdir: String, background: Bool, chatID: String?, ancestorChatIDs: [String] = [],
        pid: Int32, budget: SubscriberBudget, input: ProcessInput? = nil, spoolMaker: (@Sendable () -> OutputSpool?)? = nil,
        options: StartOptions = StartOptions(), exitObserver: (@Sendable (ManagedProcess) -> Void)? = nil
    ) {
        self.budget = budget
        self.exitObserver = exitObserver
        self.id = id
        self.command = command
        self.workdir = workdir
        self.background = background
        self.chatID = chatID
        self.ancestorChatIDs = ancestorChatIDs
        self.pid = pid
        self.startedAtUnix = Int64(Date().timeIntervalSince1970)
        self.startedAt = .now
        self.input = input
        self.spoolMaker = spoolMaker
        self.lost = false
        self.options = options
    }

    /// A process of an earlier agent, restored from its record and spool: exited (or lost),
    /// its head and tail rebuilt from the spool.
    init(restored record: ProcessRecord, spool: OutputSpool?, budget: SubscriberBudget, nowUnix: Int64) {
        self.budget = budget
        self.exitObserver = nil
        id = record.id
        command = record.command
        workdir = record.workdir
        background = record.background
        chatID = record.chatID
        ancestorChatIDs = []
        pid = 0
        startedAtUnix = record.startedAtUnix
        // Monotonic instants of the past, placed as far back as the wall clock says.
        startedAt = Self.instant(unix: record.startedAtUnix, nowUnix: nowUnix)
        input = nil
        spoolMaker = nil
        lost = record.exit == nil
        options = record.options
        var state = State()
        state.outputOpen = false
        state.spool = spool
        state.spoolSettled = true
        if let spool { state.output = Self.headTail(from: spool) }
        let exitedAtUnix = record.exit?.exitedAtUnix ?? nowUnix
        state.exit = Exit(
            status: record.exit.map { ExitStatus(code: $0.code, signal: $0.signal) } ?? ExitStatus(code: -1, signal: nil),
            exitedAtUnix: exitedAtUnix, exitedAt: Self.instant(unix: exitedAtUnix, nowUnix: nowUnix))
        self.state.withLock { $0 = state }
    }

    /// The monotonic instant of a Unix time at most 100 years past (times from disk may be
    /// anything; later ones are now).
    static func instant(unix: Int64, nowUnix: Int64) -> ContinuousClock.Instant {
        let (ago, overflow) = nowUnix.subtractingReportingOverflow(unix)
        let limit: Int64 = 100 * 366 * 86_400
        return ContinuousClock.now - .seconds(overflow ? (unix < 0 ? limit : 0) : min(max(0, ago), limit))
    }

    /// The head and tail of a spooled output (from its oldest kept byte).
    /// A spool that dropped its oldest bytes lost the head with them: what it kept then
    /// shows as omitted bytes and a tail, not as a head that it is not (nor, for an await or
    /// a stream, as the output from offset 0).
    static func headTail(from spool: OutputSpool) -> HeadTail {
        let start = spool.dropped
        let end = spool.end
        var output = start > 0 ? HeadTail(headCapacity: 0) : HeadTail()
        let head = spool.read(from: start, limit: output.headCapacity)
        output.write(head.bytes)
        let tailStart = max(head.next, end >= UInt64(output.tailCapacity) ? end - UInt64(output.tailCapacity) : 0)
        // Bytes before the oldest kept one, and between head and tail, count as omitted.
        // (A head that is not full means everything kept fit in it: nothing to skip then.)
        let unseen = Int(clamping: start) &+ Int(clamping: tailStart - head.next)
        if unseen > 0, output.isHeadFull { output.skip(max(0, unseen)) }
        if tailStart < end { output.write(spool.read(from: tailStart, limit: Int(clamping: end - tailStart)).bytes) }
        return output
    }

    /// A consistent view: state is read together with output, so `running == false`
    /// means the shell's output is final.
    public struct Snapshot: Sendable {
        public var running: Bool
        public var exit: ExitStatus?
        public var exitedAtUnix: Int64?
        public var output: [UInt8]
        public var truncation: OutputTruncation?
    }

    public var isRunning: Bool { state.withLock { $0.exit == nil } }

    /// Why the record of the start could not be written, if it could not: the process runs,
    /// but an agent restart will not find it.
    public var recordFailure: String? {
        get { state.withLock { $0.recordFailure } }
    }

    func noteRecordFailure(_ reason: String) {
        state.withLock { $0.recordFailure = reason }
    }

    /// The output spool as it is now (nil before the first output, or without spooling).
    var spool: OutputSpool? { state.withLock { $0.spool } }

    /// No spool is made from now on (the process is forgotten); the one there is, if any.
    func retireSpool() -> OutputSpool? {
        state.withLock { s in
            s.spoolSettled = true
            return s.spool
        }
    }

    private static func settleSpool(_ s: inout State, _ maker: (@Sendable () -> OutputSpool?)?) -> OutputSpool? {
        if !s.spoolSettled {
            s.spoolSettled = true
            s.spool = maker?()
        }
        return s.spool
    }

    /// Bytes written so far (the offset the next byte will have).
    public var outputEnd: UInt64 { state.withLock { UInt64($0.output.totalWritten) } }

    /// Attaches an await's watch; the offset up to which it must catch up from the spool
    /// (live output from there on is fed to it), and whether the output is complete already.
    /// What is retained in memory comes with it: the head (from offset 0) always, and
    /// without a spool the tail (ending at `catchUpTo`).
    /// Nil when ``maxWatches`` awaits are attached already.
    func attach(_ watch: OutputWatch) -> (catchUpTo: UInt64, complete: Bool, head: [UInt8], tail: [UInt8])? {
        state.withLock { s in
            let end = UInt64(s.output.totalWritten)
            // The head also with a spool: the spool may have dropped what it holds.
            let head = s.output.headBytes
            let tail = s.spool == nil ? s.output.tailBytes : []
            guard s.outputOpen || s.exit == nil else { return (end, true, head, tail) }
            guard s.watches.count < Self.maxWatches else { return nil }
            s.nextID += 1
            s.watches[s.nextID] = watch
            return (end, false, head, tail)
        }
    }

    /// Most awaits matching one process's output at once.
    public static let maxWatches = 16

    func detach(_ watch: OutputWatch) {
        state.withLock { s in
            if let key = s.watches.first(where: { $0.value === watch })?.key { s.watches[key] = nil }
        }
    }

    var exitInfo: Exit? { state.withLock { $0.exit } }

    /// True while some process (the shell or an orphan) still holds the output pipe.
    var isOutputOpen: Bool { state.withLock { $0.outputOpen } }

    var reactorToken: UInt64? {
        get { state.withLock { $0.reactorToken } }
        set { state.withLock { $0.reactorToken = newValue } }
    }

    public func snapshot() -> Snapshot {
        // Copy the store under the lock (copy-on-write: O(1)) and render outside it.
        let (store, exit) = state.withLock { ($0.output, $0.exit) }
        let rendered = store.output()
        return Snapshot(
            running: exit == nil, exit: exit?.status, exitedAtUnix: exit?.exitedAtUnix,
            output: rendered.bytes, truncation: rendered.truncation)
    }

    /// Registers `body` to run once at exit; returns nil (and does not register) if the
    /// process has already exited.
    func onExit(_ body: @escaping @Sendable () -> Void) -> UInt64? {
        state.withLock { s -> UInt64? in
            guard s.exit == nil else { return nil }
            s.nextID += 1
            s.exitWaiters[s.nextID] = body
            return s.nextID
        }
    }

    func removeExitWaiter(_ id: UInt64) {
        _ = state.withLock { $0.exitWaiters.removeValue(forKey: id) }
    }

    /// Why a subscription was refused.
    enum SubscribeRefusal: Error {
        /// ``maxSubscribers`` are attached to this process.
        case processFull
        /// The manager's ``SubscriberBudget/maxSubscribers`` are attached in all.
        case allFull
    }

    /// The retained output so far (raw, unrendered), and a subscription for what follows.
    func subscribe() throws(SubscribeRefusal) -> (head: [UInt8], omitted: Int, tail: [UInt8], subscription: OutputSubscription) {
        let subscription = OutputSubscription(budget: budget)
        return try state.withLock { s throws(SubscribeRefusal) in
            guard s.subscribers.count < Self.maxSubscribers else { throw .processFull }
            if let exit = s.exit {
                subscription.finish(exit.status)
            } else {
                guard budget.admit() else { throw .allFull }
                s.nextID += 1
                s.subscribers[s.nextID] = subscription
            }
            return (s.output.headBytes, s.output.omittedCount, s.output.tailBytes, subscription)
        }
    }

    /// Detaches a subscriber (its WebSocket closed) and frees what it had queued.
    func unsubscribe(_ subscription: OutputSubscription) {
        subscription.cancel()
        let removed = state.withLock { s -> Bool in
            guard let key = s.subscribers.first(where: { $0.value === subscription })?.key else { return false }
            s.subscribers[key] = nil
            return true
        }
        if removed { budget.leave() }
    }

    var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// Awaits matching this process's output now.
    var watchCount: Int { state.withLock { $0.watches.count } }

    /// Requests currently blocked in `wait=true` (for tests and diagnostics).
    var exitWaiterCount: Int { state.withLock { $0.exitWaiters.count } }
}

extension ManagedProcess: ProcessEventSink {
    func output(_ bytes: UnsafeRawBufferPointer) {
        ProcessMetrics.outputBytes.increment(by: bytes.count)
        state.withLock { s in
            let offset = UInt64(s.output.totalWritten)
            // The spool is appended under the lock too: a reader that saw `totalWritten`
            // finds every byte before it on disk.
            Self.settleSpool(&s, spoolMaker)?.append(bytes)
            for watch in s.watches.values { watch.feed(bytes, at: offset) }
            s.output.write(bytes)
            if !s.subscribers.isEmpty {
                // One copy, shared by every subscriber, in pieces of one WebSocket message
                // (uniform sizes the allocator reuses; a message in flight pins only itself).
                var offset = 0
                while offset < bytes.count {
                    let end = min(offset + OutputSubscription.maxBatchBytes, bytes.count)
                    let chunk = ByteBuffer(bytes: UnsafeRawBufferPointer(rebasing: bytes[offset..<end]))
                    for subscriber in s.subscribers.values { subscriber.push(chunk) }
                    offset = end
                }
            }
        }
    }

    func discardUnretained(_ discard: (_ keep: Int) -> Int) {
        // A terminal cannot be spliced. (Spooled output is spliced into its spool, not dropped.)
        guard input?.kind != .terminal else { return }
        state.withLock { s in
            guard s.subscribers.isEmpty, s.output.isHeadFull, s.watches.isEmpty else { return }
            let dropped = discard(s.output.tailCapacity)
            guard dropped > 0 else { return }
            s.output.skip(dropped)
            ProcessMetrics.outputBytes.increment(by: dropped)
        }
    }

    func outputClosed() {
        let (watches, spool) = state.withLock { s -> ([OutputWatch], OutputSpool?) in
            s.outputOpen = false
            defer { s.watches.removeAll() }
            return (Array(s.watches.values), s.spool)
        }
        spool?.finish()
        for watch in watches { watch.outputEnded() }
    }

    func exited(_ status: ExitStatus) {
        let (waiters, subscribers) = state.withLock { s -> ([@Sendable () -> Void], [OutputSubscription]) in
            s.exit = Exit(status: status, exitedAtUnix: Int64(Date().timeIntervalSince1970), exitedAt: .now)
            defer {
                s.exitWaiters.removeAll()
                s.subscribers.removeAll()
            }
            return (Array(s.exitWaiters.values), Array(s.subscribers.values))
        }
        input?.processExited()
        // What the shell wrote is all read: an unfinished last line counts now.
        for watch in state.withLock({ Array($0.watches.values) }) { watch.outputEnded() }
        exitObserver?(self)
        for subscriber in subscribers {
            subscriber.finish(status)
            budget.leave()
        }
        for waiter in waiters { waiter() }
    }
}
