/// Drives a session's protocol rules (``YamuxSessionStateMachine``) with no I/O, timers or
/// tasks, so a fuzz target (`Fuzz/`, `make fuzz`) can feed it arbitrary peer bytes mixed
/// with local calls. It exists for the fuzz targets only: the agent uses ``YamuxSession``.
///
/// Actions are performed as ``YamuxSession`` performs them, except that waiters are only
/// counted, timers fire when the input says so, and the accept handler and sinks record.
public final class YamuxFuzzDriver {
    /// One step of a fuzz case.
    public enum Operation: Sendable {
        /// Bytes from the peer (split anywhere).
        case receive([UInt8])
        /// Opens a stream (its SYN is queued).
        case open
        /// Writes to the `n`th known stream (modulo their count) as far as windows allow.
        case write(stream: Int, [UInt8])
        /// Reads what the `n`th known stream has buffered.
        case read(stream: Int)
        /// Half-closes (FIN) the `n`th known stream.
        case closeWrite(stream: Int)
        /// Closes the `n`th known stream for reading and writing.
        case close(stream: Int)
        /// Resets the `n`th known stream.
        case reset(stream: Int)
        /// Puts the `n`th known stream into push mode (a sink).
        case sink(stream: Int)
        /// Accepts one stream the peer opened, if any.
        case accept
        /// From now on, streams the peer opens go to an accept handler at once.
        case acceptWithHandler
        /// Sends a ping.
        case ping
        /// Sends GoAway with this code (taken modulo the known codes).
        case goAway(UInt8)
        /// Moves the clock on and runs the open/close timeouts.
        case sweep(advanceSeconds: UInt16)
        /// Fires the lazy-flush timer.
        case flush
        /// The transport's writability changes.
        case transportWritable(Bool)
        /// The transport reached EOF.
        case transportClosed
        /// Closes the session locally.
        case closeSession
    }

    private var machine: YamuxSessionStateMachine
    private let window: UInt32
    private var now = Duration.zero
    private var transportWritable = true
    /// Streams the driver knows of (opened or accepted), in order.
    private var known: [UInt32] = []

    /// Everything written to the transport, one element per write.
    public private(set) var writes: [[UInt8]] = []
    /// The session closed its transport (at most once).
    public private(set) var transportClosedCount = 0
    /// Bytes written after the transport was closed (must stay 0).
    public private(set) var bytesAfterClose = 0
    /// The most bytes any stream held buffered for its reader, after any step.
    public private(set) var maxBuffered = 0
    /// The most payload bytes queued for sending, after any step.
    public private(set) var maxQueuedData = 0
    /// Data delivered to reads and sinks, in bytes.
    public private(set) var delivered = 0

    /// The queue limit ``maxQueuedData`` may exceed by at most one frame.
    public let queueLimit: Int
    /// The largest Data frame this side sends.
    public let maxDataFrame: Int

    public init(role: YamuxSession.Role, configuration: YamuxSession.Configuration = .init()) {
        machine = YamuxSessionStateMachine(role: role, configuration: .init(configuration))
        window = configuration.window
        queueLimit = configuration.maxQueuedData
        maxDataFrame = configuration.maxDataFrame
    }

    /// The per-stream receive window: no stream may ever buffer more.
    public var receiveWindow: Int { Int(window) }
    /// Why the session ended, or nil while it is open.
    public var closeReason: YamuxSessionError? { machine.closeReason }
    /// Streams tracked by the session.
    public var streamCount: Int { machine.streamCount }

    /// Performs one step and records what it did.
    public func perform(_ operation: Operation) {
        switch operation {
        case .receive(let bytes):
            if let job = machine.receive(bytes) {
                run(job)
                if machine.endReceive() { flush() }
            }
        // Streams the peer opened while no handler was installed wait to be accepted.
        case .open:
            if let (id, actions) = try? machine.open(now: now) {
                known.append(id)
                perform(actions)
            }
        case .write(let index, let bytes):
            guard let id = stream(index) else { break }
            var offset = 0
            // Bounded: each queued step moves `offset` on; a wait ends the write.
            while offset < bytes.count {
                guard case .queued(let end, let actions)? = try? machine.write(id, bytes, from: offset), end > offset else { break }
                offset = end
                perform(actions)
            }
        case .read(let index):
            guard let id = stream(index), case .data(let chunk, let actions)? = try? machine.read(id) else { break }
            delivered += chunk.count
            perform(actions)
        case .closeWrite(let index):
            if let id = stream(index) { perform(machine.closeWrite(id, now: now)) }
        case .close(let index):
            if let id = stream(index) { perform(machine.closeStream(id, now: now)) }
        case .reset(let index):
            if let id = stream(index) { run(machine.reset(id)) }
        case .sink(let index):
            if let id = stream(index) {
                run(
                    machine.setSink(id) { [weak self] event in
                        if case .data(let bytes) = event { self?.delivered += bytes.count }
                    })
            }
        case .accept:
            if case .stream(let id, let actions) = machine.accept() {
                known.append(id)
                perform(actions)
            }
        case .acceptWithHandler:
            machine.acceptWithHandler()
            while let (id, actions) = machine.acceptNext() {
                known.append(id)
                perform(actions)
            }
        case .ping:
            if let (_, actions) = try? machine.ping() { perform(actions) }
        case .goAway(let code):
            perform(machine.goAway(YamuxGoAwayCode(rawValue: UInt32(code % 3)) ?? .normal))
        case .sweep(let seconds):
            now += .seconds(Int(seconds))
            run(machine.sweep(now: now))
        case .flush:
            flush()
        case .transportWritable(let writable):
            transportWritable = writable
            if writable { perform(machine.transportWritable()) }
        case .transportClosed:
            run(machine.transportClosed())
        case .closeSession:
            run(machine.close())
        }
        observe()
    }

    /// The `index`th known stream (modulo their count), if any.
    private func stream(_ index: Int) -> UInt32? {
        known.isEmpty ? nil : known[index % known.count]
    }

    private func observe() {
        for id in known {
            if let state = machine.streams[id] { maxBuffered = max(maxBuffered, state.buffer.reduce(0) { $0 + $1.count }) }
        }
        maxQueuedData = max(maxQueuedData, machine.queuedData)
    }

    private func run(_ job: YamuxSessionStateMachine.Job) {
        var job = job
        // Bounded: each step advances the job's phases, which end.
        while let actions = machine.step(&job) { perform(actions) }
    }

    private func flush() {
        guard var pending = machine.startFlush() else { return }
        while let write = machine.nextWrite(&pending, transportWritable: transportWritable) { record(write.bytes) }
        perform(machine.finishFlush())
    }

    private func record(_ bytes: [UInt8]) {
        if transportClosedCount > 0 { bytesAfterClose += bytes.count }
        writes.append(bytes)
    }

    private func perform(_ actions: [YamuxSessionStateMachine.Action]) {
        for action in actions {
            switch action {
            case .flush: flush()
            case .scheduleLazyFlush, .scheduleSweep, .cancelSweep, .resume: break
            case .deliver(let sink, let event): sink(event)
            case .accept(let id): known.append(id)
            case .run(let job): run(job)
            case .closeTransport(let finalWrite):
                if let finalWrite { record(finalWrite.bytes) }
                transportClosedCount += 1
            }
        }
    }
}
