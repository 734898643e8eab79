import NIOCore
import NIOPosix

/// A yamux session over any ``YamuxTransport``.
///
/// The session is an actor whose executor is one NIO event loop: the loop of the channel it
/// runs over. A channel handler feeds received bytes synchronously
/// (`session.assumeIsolated { $0.receive(bytes) }`), and frames are handed to the
/// transport on the same thread, so a round trip costs no thread hops inside the session.
/// What one call (or one received chunk) produces leaves in one transport write, control
/// frames (pings, window updates, opens, closes) ahead of queued data, so pings are answered
/// promptly even under bulk transfer; SYN, ACK and FIN wait up to
/// ``Configuration/lazyDelay`` to ride with the next write.
///
/// The protocol itself (streams, windows, queues, pings) is ``YamuxSessionStateMachine``, a
/// plain value; this actor owns what it does not: the transport, the timers, the suspended
/// callers and the accept handler. It feeds the machine events and performs its actions.
///
/// Bounds: each stream buffers at most its receive window (256 KiB, enforced against the
/// peer); queued outbound data is capped at ``Configuration/maxQueuedData`` (writers
/// wait); at most ``Configuration/acceptBacklog`` unaccepted streams (more are refused
/// with RST); one write carries at most ``maxBatch`` bytes of data; streams the peer never
/// acknowledges or never closes are bounded in time
/// (``Configuration/streamOpenTimeout``, ``Configuration/streamCloseTimeout``).
public actor YamuxSession {
    public enum Role: Sendable {
        /// Opens odd stream IDs (the agent).
        case client
        /// Opens even stream IDs (coderd).
        case server
    }

    public struct Configuration: Sendable {
        /// Per-stream window each way (256 KiB).
        public var window: UInt32 = YamuxHeader.initialWindow
        /// Unaccepted peer-opened streams before refusing with RST.
        public var acceptBacklog: Int = 256
        /// Outbound data bytes queued before writers wait.
        public var maxQueuedData: Int = 1 << 20
        /// Largest Data frame we send (a quarter window: the peer can return credit while
        /// the rest of the window is still on its way).
        public var maxDataFrame: Int = 64 * 1024
        /// How long a SYN, ACK or FIN waits for a write to ride with: one transport write
        /// per round trip instead of three or four.
        public var lazyDelay: TimeAmount = .milliseconds(1)
        /// A stream we opened that the peer has not ACKed (nor answered) by then ends the
        /// session, as Go's yamux does (75 s).
        public var streamOpenTimeout: TimeAmount = .seconds(75)
        /// A stream we closed that the peer never closes is reset and forgotten by then, so
        /// its state cannot stay forever (Go: 5 min).
        public var streamCloseTimeout: TimeAmount = .minutes(5)
        /// How often the two timeouts above are checked.
        public var sweepInterval: TimeAmount = .seconds(5)

        public init() {}
    }

    /// Largest batch handed to the transport in one write.
    public static let maxBatch = 256 * 1024

    public nonisolated let role: Role
    /// The loop everything of this session runs on.
    public nonisolated let eventLoop: any EventLoop
    public nonisolated let configuration: Configuration
    /// Where frames go; called on `eventLoop` only.
    private let transport: any YamuxTransport
    private let allocator = ByteBufferAllocator()
    /// The protocol's state; every change to it goes through its methods.
    private var machine: YamuxSessionStateMachine
    /// Suspended callers, by the name the machine gave them: one per suspended task.
    private var waiters: [YamuxSessionStateMachine.WaiterID: CheckedContinuation<Void, Never>] = [:]
    /// Push-mode accepting (``setAcceptHandler(_:)``).
    private var acceptHandler: ((YamuxStream) -> Void)?
    /// Armed while a SYN, ACK or FIN waits for a write to ride with.
    private var lazyTimer: Scheduled<Void>?
    /// Armed while a stream's open or close timeout runs.
    private var sweepTimer: Scheduled<Void>?

    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        eventLoop.executor.asUnownedSerialExecutor()
    }

    /// - Parameters:
    ///   - eventLoop: the loop the transport lives on (for a NIO channel, its `eventLoop`).
    public init(
        role: Role, transport: any YamuxTransport,
        eventLoop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next(),
        configuration: Configuration = Configuration()
    ) {
        self.role = role
        self.transport = transport
        self.eventLoop = eventLoop
        self.configuration = configuration
        self.machine = YamuxSessionStateMachine(role: role, configuration: .init(configuration))
    }

    /// Why the session ended, or nil while it is open.
    public var closeReason: YamuxSessionError? { machine.closeReason }

    /// Returns once the session has ended, with the reason.
    @discardableResult
    public func waitClosed() async -> YamuxSessionError {
        while machine.closeReason == nil {
            await suspend { $0.waitForClose() }
        }
        return machine.closeReason!
    }

    // MARK: Inbound

    /// Feeds bytes read from the transport (split anywhere).
    public func receive(_ bytes: [UInt8]) {
        guard let job = machine.receive(bytes) else { return }
        run(job)
        // What the frames of this chunk made us send leaves in one write, at the end.
        if machine.endReceive() { flush() }
    }

    /// The transport reached EOF or failed: everything ends.
    public func transportClosed() {
        run(machine.transportClosed())
    }

    /// The transport can take data again (see ``YamuxTransport/isWritable``).
    public func transportWritable() {
        perform(machine.transportWritable())
    }

    // MARK: Opening and accepting

    /// Opens a stream (WindowUpdate+SYN, sent at once as Go's yamux does); data may be
    /// written before the peer's ACK, and leaves in the same transport write as the SYN.
    public func open() throws(YamuxSessionError) -> YamuxStream {
        let (id, actions) = try machine.open(now: Self.now)
        perform(actions)
        return YamuxStream(id: id, session: self)
    }

    /// The next stream the peer opened (answered with ACK), or nil once the session ends.
    public func accept() async -> YamuxStream? {
        while true {
            switch machine.accept() {
            case .stream(let id, let actions):
                perform(actions)
                return YamuxStream(id: id, session: self)
            case .ended:
                return nil
            case .wait:
                await suspend { $0.waitToAccept() }
            }
        }
    }

    /// Push-mode accepting: each stream the peer opens from now on is accepted (ACK) and
    /// handed to `handler` synchronously, on the loop, instead of to ``accept()``.
    public func setAcceptHandler(_ handler: @escaping (YamuxStream) -> Void) {
        acceptHandler = handler
        machine.acceptWithHandler()
        while let next = machine.acceptNext() {
            perform(next.actions)
            handler(YamuxStream(id: next.streamID, session: self))
        }
    }

    // MARK: Stream operations

    func read(_ id: UInt32) async throws(YamuxSessionError) -> [UInt8]? {
        while true {
            switch try machine.read(id) {
            case .data(let chunk, let actions):
                perform(actions)
                return chunk
            case .end:
                return nil
            case .wait:
                await suspend { $0.waitToRead(id) }
            }
        }
    }

    func write(_ id: UInt32, _ bytes: [UInt8]) async throws(YamuxSessionError) {
        var offset = 0
        while offset < bytes.count {
            switch try machine.write(id, bytes, from: offset) {
            case .waitForWindow:
                await suspend { $0.waitForWindow(id) }
            case .waitForQueueSpace:
                await suspend { $0.waitForQueueSpace() }
            case .queued(let end, let actions):
                // Everything the window and the queue allowed, then one flush.
                offset = end
                perform(actions)
            }
        }
    }

    /// Queues all of `bytes` on stream `id` if its window and the outbound queue take them
    /// now (then flushes); false, with nothing queued, when ``YamuxStream/write(_:)`` would
    /// have to wait. Throws when the stream cannot be written at all.
    public func tryWrite(_ id: UInt32, _ bytes: [UInt8]) throws(YamuxSessionError) -> Bool {
        guard let actions = try machine.tryWrite(id, bytes) else { return false }
        perform(actions)
        return true
    }

    /// Push mode: from now on this stream's inbound data, its end and its failure go to
    /// `sink`, synchronously on the loop, instead of to ``YamuxStream/read()`` (data is
    /// credited back as it is delivered). Lets a caller answer from the read itself.
    public func setSink(_ id: UInt32, _ sink: @escaping (YamuxStreamEvent) -> Void) {
        run(machine.setSink(id, sink))
    }

    /// FIN and stop reading on stream `id`: what is buffered or still arrives is dropped, so
    /// the stream is forgotten as soon as the peer's FIN arrives. (``close()`` ends the
    /// whole session.)
    public func closeStream(_ id: UInt32) {
        perform(machine.closeStream(id, now: Self.now))
    }

    func closeWrite(_ id: UInt32) {
        perform(machine.closeWrite(id, now: Self.now))
    }

    /// Aborts stream `id` (RST).
    public func resetStream(_ id: UInt32) { reset(id) }

    func reset(_ id: UInt32) {
        run(machine.reset(id))
    }

    /// Streams currently tracked (open in at least one direction).
    public var streamCount: Int { machine.streamCount }

    // MARK: Ping, GoAway, close

    /// Sends a ping and waits for its answer, at most `timeout` (Go peers drop a session
    /// whose ping is not answered within 10 s).
    public func ping(timeout: Duration = .seconds(10)) async throws(YamuxSessionError) {
        let (value, actions) = try machine.ping()
        perform(actions)
        let (seconds, attoseconds) = timeout.components
        let timer = eventLoop.scheduleTask(in: .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)) {
            self.assumeIsolated { $0.expirePing(value) }
        }
        await suspend { $0.waitForPingAnswer(value) }
        timer.cancel()
        try machine.pingEnded(value)
    }

    private func expirePing(_ value: UInt32) {
        perform(machine.pingExpired(value))
    }

    /// Tells the peer to open no more streams (code 0), or that the session is over.
    public func goAway(_ code: YamuxGoAwayCode = .normal) {
        perform(machine.goAway(code))
    }

    /// Closes the session: queued frames (data included) are written, then the transport
    /// is closed. (Like yamux v0.1.2, no GoAway is sent.) ``closeStream(_:)`` closes one
    /// stream.
    public func close() {
        run(machine.close())
    }

    /// Closes the session from any thread (for cancellation handlers).
    public nonisolated func closeSoon() {
        eventLoop.execute { self.assumeIsolated { $0.close() } }
    }

    // MARK: Performing the machine's actions

    /// Carries out `job` to its end, one step at a time: a callout it makes runs before the
    /// job goes on, and may call back into the session.
    private func run(_ job: YamuxSessionStateMachine.Job) {
        var job = job
        while let actions = machine.step(&job) { perform(actions) }
    }

    private func perform(_ actions: [YamuxSessionStateMachine.Action]) {
        for action in actions {
            switch action {
            case .flush:
                flush()
            case .scheduleLazyFlush:
                lazyTimer = eventLoop.scheduleTask(in: configuration.lazyDelay) {
                    self.assumeIsolated { session in
                        session.lazyTimer = nil
                        session.flush()
                    }
                }
            case .scheduleSweep:
                sweepTimer = eventLoop.scheduleTask(in: configuration.sweepInterval) {
                    self.assumeIsolated { $0.sweep() }
                }
            case .cancelSweep:
                sweepTimer?.cancel()
                sweepTimer = nil
            case .resume(let ids):
                for id in ids { waiters.removeValue(forKey: id)?.resume() }
            case .deliver(let sink, let event):
                sink(event)
            case .accept(let id):
                acceptHandler?(YamuxStream(id: id, session: self))
            case .run(let job):
                run(job)
            case .closeTransport(let finalWrite):
                if let finalWrite { transport.write(buffer(finalWrite)) }
                transport.close()
            }
        }
    }

    /// Suspends the calling task until the machine names it in a `resume` action.
    private func suspend(_ register: (inout YamuxSessionStateMachine) -> YamuxSessionStateMachine.WaiterID) async {
        await withCheckedContinuation { continuation in
            waiters[register(&machine)] = continuation
        }
    }

    private func sweep() {
        sweepTimer = nil
        run(machine.sweep(now: Self.now))
    }

    /// Writes control frames, then data frames while the transport is writable, in
    /// batches of up to ``maxBatch``; what is left waits for ``transportWritable()``.
    private func flush() {
        lazyTimer?.cancel()
        lazyTimer = nil
        guard var pending = machine.startFlush() else { return }
        while let write = machine.nextWrite(&pending, transportWritable: transport.isWritable) {
            transport.write(buffer(write))
        }
        perform(machine.finishFlush())
    }

    /// One write's bytes, sized first, then filled: each byte is copied once, into the
    /// buffer the transport sends.
    private func buffer(_ write: YamuxSessionStateMachine.OutboundWrite) -> ByteBuffer {
        var batch = allocator.buffer(capacity: write.byteCount)
        batch.writeBytes(write.control)
        for frame in write.frames { batch.writeBytes(frame) }
        return batch
    }

    /// The machine's clock: NIO's monotonic uptime, as the deadlines were before.
    private static var now: Duration {
        .nanoseconds(Int64(NIODeadline.now().uptimeNanoseconds))
    }
}

extension YamuxSessionStateMachine.Configuration {
    /// The machine's limits from the session's configuration.
    init(_ configuration: YamuxSession.Configuration) {
        self.init(
            window: configuration.window,
            acceptBacklog: configuration.acceptBacklog,
            maxQueuedData: configuration.maxQueuedData,
            maxDataFrame: configuration.maxDataFrame,
            maxBatch: YamuxSession.maxBatch,
            streamOpenTimeout: .nanoseconds(configuration.streamOpenTimeout.nanoseconds),
            streamCloseTimeout: .nanoseconds(configuration.streamCloseTimeout.nanoseconds),
            streamOpenTimeoutText: "\(configuration.streamOpenTimeout)"
        )
    }
}
