/// A yamux session's protocol state and rules, as a plain value with no
/// I/O, timers or concurrency, so the protocol can be driven and checked byte by byte.
///
/// ``YamuxSession`` feeds it events (bytes read, calls on streams, timers firing, the
/// transport's state) and performs the ``Action``s it returns: transport writes, timers,
/// resuming suspended callers (named by ``WaiterID``; the session keeps their
/// continuations) and callouts to the application (sinks, the accept handler). Sinks are
/// kept here with their streams but never called here.
///
/// Work that makes callouts is a ``Job``, carried out by ``step(_:)``: each step's actions
/// end with at most one callout (or one nested job), which the session performs before it
/// asks for the next step. Whatever the callout does to the session meanwhile (close its
/// stream, reset it, write) is what the rest of the job sees, as when the session handled
/// everything inline.
///
/// Every stored property is declared in this file; the extensions split the rules by
/// concern: `+Inbound` (frames read), `+Streams` (stream calls, timeouts), `+Outbound`
/// (queues and flushing) and `+Session` (pings, GoAway, the end).
struct YamuxSessionStateMachine {
    /// Where a push-mode stream's data, end and failure go (``YamuxSession/setSink(_:_:)``).
    typealias Sink = (YamuxStreamEvent) -> Void

    /// Names a suspended caller (a reader, a writer, `accept`, `ping`, `waitClosed`), so the
    /// machine can say whom to wake without holding the continuation itself.
    struct WaiterID: Hashable {
        let rawValue: UInt64
    }

    /// The limits the machine enforces, taken from ``YamuxSession/Configuration``.
    struct Configuration {
        /// Per-stream window each way (256 KiB by default).
        var window: UInt32
        /// Unaccepted peer-opened streams before refusing with RST.
        var acceptBacklog: Int
        /// Outbound data bytes queued before writers wait.
        var maxQueuedData: Int
        /// Largest Data frame we send.
        var maxDataFrame: Int
        /// Largest batch handed to the transport in one write (``YamuxSession/maxBatch``).
        var maxBatch: Int
        /// A stream we opened that the peer has not answered by then ends the session.
        var streamOpenTimeout: Duration
        /// A stream we closed that the peer never closes is reset by then.
        var streamCloseTimeout: Duration
        /// How `streamOpenTimeout` reads in the error that ends the session.
        var streamOpenTimeoutText: String
    }

    /// One stream's state, both directions.
    struct StreamState {
        /// Data received and not yet read, in arrival order: at most the receive window
        /// (``Configuration/window``) in all, since a peer that sends more ends the session.
        var buffer: [[UInt8]] = []
        /// Credit we still grant the peer (at most ``Configuration/window``).
        var receiveWindow: UInt32
        /// Consumed by the reader but not yet returned to the peer (returned at half a window).
        var unacknowledged: UInt32 = 0
        /// Credit the peer granted us.
        var sendWindow: UInt32
        /// We sent FIN.
        var localFin = false
        /// The peer sent FIN.
        var remoteFin = false
        /// Either side reset the stream.
        var wasReset = false
        /// Opened by us and not yet answered: since when (``Configuration/streamOpenTimeout``).
        var openedAt: Duration?
        /// Closed by us (FIN) while the peer's side is still open: since when
        /// (``Configuration/streamCloseTimeout``).
        var closedAt: Duration?
        /// The reader is gone (``YamuxSession/closeStream(_:)``): unread and later data is dropped.
        var discarding = false
        /// Push mode: inbound data goes here, as it arrives, instead of to reads.
        var sink: Sink?
        /// The task waiting to read (one; a second reader replaces the first, as before).
        var readWaiter: WaiterID?
        /// Tasks waiting for send credit: one per task writing this stream at the same time.
        var windowWaiters: [WaiterID] = []

        init(window: UInt32) {
            receiveWindow = window
            sendWindow = window
        }

        /// Removes the reader and the writers waiting on this stream, to wake them (a reset
        /// or the session's end).
        mutating func takeWaiters() -> [WaiterID] {
            var waiters = windowWaiters
            if let readWaiter { waiters.insert(readWaiter, at: 0) }
            readWaiter = nil
            windowWaiters.removeAll()
            return waiters
        }

        /// Everything buffered as one chunk (at most the window: one read per wake-up),
        /// counted as consumed.
        mutating func takeBuffered() -> [UInt8] {
            var chunk = buffer[0]
            if buffer.count > 1 {
                chunk.reserveCapacity(buffer.reduce(0) { $0 + $1.count })
                for more in buffer.dropFirst() { chunk.append(contentsOf: more) }
            }
            buffer.removeAll(keepingCapacity: true)
            unacknowledged += UInt32(chunk.count)
            return chunk
        }

        /// The credit to return to the peer now, if half a window was consumed and the peer
        /// still sends; it goes back into the receive window.
        mutating func takeCreditIfDue(window: UInt32) -> UInt32? {
            guard unacknowledged >= window / 2, !remoteFin else { return nil }
            let credit = unacknowledged
            receiveWindow += credit
            unacknowledged = 0
            return credit
        }
    }

    /// What the session does for the machine, in the order given.
    enum Action {
        /// Write what is queued, now: ``startFlush()``, ``nextWrite(_:transportWritable:)``
        /// until nil, then ``finishFlush()``.
        case flush
        /// Arm the timer that flushes after ``YamuxSession/Configuration/lazyDelay``.
        case scheduleLazyFlush
        /// Arm the timer that runs ``sweep(now:)`` after ``YamuxSession/Configuration/sweepInterval``.
        case scheduleSweep
        /// Disarm the sweep timer.
        case cancelSweep
        /// Resume these suspended callers, in this order.
        case resume([WaiterID])
        /// Call a push-mode stream's sink (a callout).
        case deliver(Sink, YamuxStreamEvent)
        /// Hand the stream the peer opened to the accept handler (a callout).
        case accept(streamID: UInt32)
        /// Carry out this job to its end, now (it makes callouts of its own).
        case run(Job)
        /// Write these last bytes, if any, then close the transport: the session has ended.
        case closeTransport(finalWrite: OutboundWrite?)
    }

    /// Work that makes callouts, carried out by ``step(_:)`` until it returns nil.
    enum Job {
        /// Frames decoded from received bytes (``receive(_:)``).
        case inbound(InboundJob)
        /// The end of the session (``fail(_:flushData:)``).
        case failure(FailureJob)
        /// One stream aborted (``reset(_:)``).
        case reset(ResetJob)
        /// A sink taking over a stream (``setSink(_:_:)``).
        case attachSink(AttachJob)
        /// The check of open and close timeouts (``sweep(now:)``).
        case sweep(SweepJob)
    }

    // MARK: State (every stored property of the machine)

    let role: YamuxSession.Role
    let configuration: Configuration
    /// Received bytes not yet decoded: at most one header and one Data payload of at most a
    /// window (``YamuxFrameDecoder``).
    var decoder: YamuxFrameDecoder
    /// Streams open in at least one direction. Peer-opened ones wait in `acceptQueue` (at
    /// most ``Configuration/acceptBacklog``) until accepted, after which the application
    /// ends them; one we closed that the peer never closes is reset after
    /// ``Configuration/streamCloseTimeout``.
    var streams: [UInt32: StreamState] = [:]
    /// Streams forgotten while a job was in progress, so that the job finishes with them
    /// (as the session's old reference-typed state did); emptied when the last job ends, so
    /// at most the streams one job's callouts forget.
    var retired: [UInt32: StreamState] = [:]
    /// Jobs created and not yet finished (more than one when a callout starts another).
    var jobsInProgress = 0
    /// The ID our next stream gets (odd for the client, even for the server).
    var nextStreamID: UInt32
    /// Peer-opened streams not yet accepted: at most ``Configuration/acceptBacklog`` (more
    /// are refused with RST).
    var acceptQueue: [UInt32] = []
    /// An accept handler is installed: streams the peer opens are handed over at once.
    var acceptsWithHandler = false
    /// The task waiting to accept (one; a second replaces the first, as before).
    var acceptWaiter: WaiterID?
    /// The peer sent GoAway(normal): we may open no more streams.
    var remoteGoneAway = false
    /// Why the session ended, or nil while it is open.
    var closeReason: YamuxSessionError?
    /// Tasks waiting for the session to end: one per waiting task.
    var closeWaiters: [WaiterID] = []

    /// Encoded control frames waiting for the next flush (12 bytes each): what one received
    /// chunk or one call produces, written at the end of it even while data is held back.
    var control: [UInt8] = []
    /// Encoded Data frames, and FINs (which must follow their stream's data): at most
    /// ``Configuration/maxQueuedData`` payload bytes plus one frame's, and a FIN per stream.
    var dataQueue: [[UInt8]] = []
    /// Frames of `dataQueue` before this index are written (compacted after each flush).
    var dataHead = 0
    /// Payload bytes in `dataQueue` not yet written.
    var queuedData = 0
    /// Writers waiting for `queuedData` to fall below the cap: one per waiting task.
    var spaceWaiters: [WaiterID] = []
    /// A received chunk is being handled: what it produces leaves in one write at its end.
    var receiving = false
    /// A flush was asked for while receiving.
    var needsFlush = false
    /// The lazy-flush timer is armed.
    var lazyFlushScheduled = false
    /// The sweep timer is armed.
    var sweepScheduled = false

    /// The value our next ping carries.
    var nextPing: UInt32 = 0
    /// Our pings awaiting their answer, by value: one per task pinging.
    var pingWaiters: [UInt32: WaiterID] = [:]
    /// Pings that timed out, until their task sees it (at most one per task pinging).
    var expiredPings: Set<UInt32> = []
    /// The name the next suspended caller gets.
    var nextWaiter: UInt64 = 0

    init(role: YamuxSession.Role, configuration: Configuration) {
        self.role = role
        self.configuration = configuration
        self.decoder = YamuxFrameDecoder(maxPayload: configuration.window)
        self.nextStreamID = role == .client ? 1 : 2
    }

    /// Streams currently tracked (open in at least one direction).
    var streamCount: Int { streams.count }

    // MARK: Jobs

    /// The next step of `job`: actions ending with at most one callout or nested job, or nil
    /// once the job is done.
    mutating func step(_ job: inout Job) -> [Action]? {
        let actions: [Action]?
        switch job {
        case .inbound(var inbound):
            actions = stepInbound(&inbound)
            job = .inbound(inbound)
        case .failure(var failure):
            actions = stepFailure(&failure)
            job = .failure(failure)
        case .reset(var reset):
            actions = stepReset(&reset)
            job = .reset(reset)
        case .attachSink(var attach):
            actions = stepAttachSink(&attach)
            job = .attachSink(attach)
        case .sweep(var sweep):
            actions = stepSweep(&sweep)
            job = .sweep(sweep)
        }
        if actions == nil {
            assert(jobsInProgress > 0, "a job was stepped after it ended")
            jobsInProgress -= 1
            if jobsInProgress == 0 { retired.removeAll() }
        }
        return actions
    }

    /// Counts `job` as in progress; the caller runs it to its end at once.
    mutating func startJob(_ job: Job) -> Job {
        jobsInProgress += 1
        return job
    }

    // MARK: Shared helpers

    /// Stops tracking stream `id`; a job in progress keeps it in `retired` until it ends.
    mutating func forget(_ id: UInt32) {
        guard let state = streams.removeValue(forKey: id) else { return }
        if jobsInProgress > 0 { retired[id] = state }
    }

    /// Forgets stream `id` once both sides have closed and nothing is left to read.
    mutating func forgetIfDone(_ id: UInt32) {
        guard let state = streams[id] else { return }
        if state.localFin && state.remoteFin && (state.buffer.isEmpty || state.discarding) { forget(id) }
    }

    /// Stream `id` as a job sees it: tracked, or forgotten by a callout since the job began.
    func jobStream(_ id: UInt32) -> StreamState? {
        streams[id] ?? retired[id]
    }

    /// Changes stream `id` in place, as a job sees it (see ``jobStream(_:)``).
    @discardableResult
    mutating func withJobStream<Result>(_ id: UInt32, _ body: (inout StreamState) -> Result) -> Result? {
        if streams[id] != nil { return body(&streams[id]!) }
        if retired[id] != nil { return body(&retired[id]!) }
        return nil
    }

    /// A new name for a task about to suspend.
    mutating func newWaiter() -> WaiterID {
        defer { nextWaiter &+= 1 }
        return WaiterID(rawValue: nextWaiter)
    }

    /// Whether `id` is one the peer opens (even for a client, odd for a server).
    func isPeerID(_ id: UInt32) -> Bool {
        role == .client ? id % 2 == 0 : id % 2 == 1
    }
}
