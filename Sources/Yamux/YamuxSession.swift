import NIOCore
import NIOPosix

/// A yamux session (spec agent-rpc §2) over any ``YamuxTransport``.
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

    private final class StreamState {
        var buffer: [[UInt8]] = []
        /// Credit we still grant the peer.
        var receiveWindow: UInt32
        /// Consumed by the reader but not yet returned to the peer.
        var unacknowledged: UInt32 = 0
        /// Credit the peer granted us.
        var sendWindow: UInt32
        var localFin = false
        /// Opened by us and not yet acknowledged: since when.
        var openedAt: NIODeadline?
        /// Closed by us (FIN) while the peer's side is still open: since when.
        var closedAt: NIODeadline?
        var remoteFin = false
        var wasReset = false
        /// The reader is gone (``YamuxStream/close()``): unread and later data is dropped.
        var discarding = false
        /// Push mode: inbound data goes here, synchronously, instead of to ``read(_:)``.
        var sink: ((YamuxStreamEvent) -> Void)?
        var readWaiter: CheckedContinuation<Void, Never>?
        var windowWaiters: [CheckedContinuation<Void, Never>] = []

        init(window: UInt32) {
            receiveWindow = window
            sendWindow = window
        }

        func wakeAll() {
            readWaiter?.resume()
            readWaiter = nil
            for waiter in windowWaiters { waiter.resume() }
            windowWaiters.removeAll()
        }
    }

    public nonisolated let role: Role
    /// The loop everything of this session runs on.
    public nonisolated let eventLoop: any EventLoop
    public nonisolated let configuration: Configuration
    private let transport: any YamuxTransport
    private var decoder: YamuxFrameDecoder
    private var streams: [UInt32: StreamState] = [:]
    private var nextStreamID: UInt32
    private var acceptQueue: [UInt32] = []
    private var acceptWaiter: CheckedContinuation<Void, Never>?
    private var remoteGoneAway = false
    private var closedReason: YamuxSessionError?
    private var closeWaiters: [CheckedContinuation<Void, Never>] = []

    /// Encoded control frames waiting for the next flush.
    private var control: [UInt8] = []
    /// Encoded data frames (and FINs, which must follow their stream's data).
    private var dataQueue: [[UInt8]] = []
    private var dataHead = 0
    private var queuedData = 0
    private var spaceWaiters: [CheckedContinuation<Void, Never>] = []
    private var flushScheduled = false

    private let allocator = ByteBufferAllocator()
    private var nextPing: UInt32 = 0
    private var pingWaiters: [UInt32: CheckedContinuation<Void, Never>] = [:]
    private var expiredPings: Set<UInt32> = []

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
        self.decoder = YamuxFrameDecoder(maxPayload: configuration.window)
        self.nextStreamID = role == .client ? 1 : 2
    }

    /// Why the session ended, or nil while it is open.
    public var closeReason: YamuxSessionError? { closedReason }

    /// Returns once the session has ended, with the reason.
    @discardableResult
    public func waitClosed() async -> YamuxSessionError {
        while closedReason == nil {
            await withCheckedContinuation { closeWaiters.append($0) }
        }
        return closedReason!
    }

    // MARK: Inbound

    /// Feeds bytes read from the transport (split anywhere).
    public func receive(_ bytes: [UInt8]) {
        guard closedReason == nil else { return }
        // What the frames of this chunk make us send leaves in one write, at the end.
        receiving = true
        defer {
            receiving = false
            if needsFlush { flush() }
        }
        decoder.feed(bytes)
        while closedReason == nil {
            let frame: YamuxFrame?
            do {
                frame = try decoder.next()
            } catch {
                protocolFailure(error.description)
                return
            }
            guard let frame else { return }
            handle(frame)
        }
    }

    /// The transport reached EOF or failed: everything ends.
    public func transportClosed() {
        fail(.sessionClosed)
    }

    /// The transport can take data again (see ``YamuxTransport/isWritable``).
    public func transportWritable() {
        if !dataQueue.isEmpty { flush() }
    }

    private func handle(_ frame: YamuxFrame) {
        let header = frame.header
        switch header.type {
        case .ping:
            if header.flags.contains(.syn) {
                enqueueControl(YamuxHeader(type: .ping, flags: .ack, streamID: 0, length: header.length))
            } else if header.flags.contains(.ack) {
                pingWaiters.removeValue(forKey: header.length)?.resume()
            }
        case .goAway:
            if header.length == YamuxGoAwayCode.normal.rawValue {
                remoteGoneAway = true
            } else {
                fail(.protocolError("remote GoAway code \(header.length)"))
            }
        case .data, .windowUpdate:
            handleStreamFrame(frame)
        }
    }

    private func handleStreamFrame(_ frame: YamuxFrame) {
        let header = frame.header
        let id = header.streamID
        if header.flags.contains(.syn) {
            guard id != 0, isPeerID(id), streams[id] == nil else {
                protocolFailure("invalid or duplicate SYN for stream \(id)")
                return
            }
            if acceptQueue.count >= configuration.acceptBacklog {
                enqueueControl(YamuxHeader(type: .windowUpdate, flags: .rst, streamID: id, length: 0))
                return
            }
            streams[id] = StreamState(window: configuration.window)
            if let acceptHandler {
                enqueueControl(YamuxHeader(type: .windowUpdate, flags: .ack, streamID: id, length: 0), lazy: true)
                acceptHandler(YamuxStream(id: id, session: self))
            } else {
                acceptQueue.append(id)
                acceptWaiter?.resume()
                acceptWaiter = nil
            }
        }
        guard let state = streams[id] else { return } // unknown stream: discard
        state.openedAt = nil // any answer (ACK, data, FIN, RST) counts as acknowledged
        if header.type == .windowUpdate, header.length > 0 {
            state.sendWindow = state.sendWindow &+ header.length
            for waiter in state.windowWaiters { waiter.resume() }
            state.windowWaiters.removeAll()
        }
        if header.type == .data, !frame.payload.isEmpty {
            guard UInt32(frame.payload.count) <= state.receiveWindow else {
                protocolFailure("stream \(id) sent \(frame.payload.count) bytes beyond its window")
                return
            }
            state.receiveWindow -= UInt32(frame.payload.count)
            if state.discarding || state.sink != nil {
                // Consumed on arrival: the credit goes straight back.
                state.unacknowledged += UInt32(frame.payload.count)
                returnCreditIfDue(id, state)
                if !state.discarding { state.sink?(.data(frame.payload)) }
            } else {
                state.buffer.append(frame.payload)
                state.readWaiter?.resume()
                state.readWaiter = nil
            }
        }
        if header.flags.contains(.fin) {
            state.remoteFin = true
            if let reader = state.readWaiter {
                // The woken reader sees the EOF and forgets the stream itself.
                state.readWaiter = nil
                reader.resume()
            } else {
                forgetIfDone(id, state)
            }
            state.sink?(.end)
        }
        if header.flags.contains(.rst) {
            state.wasReset = true
            state.wakeAll()
            state.sink?(.failed(.streamReset))
            state.sink = nil
            streams[id] = nil
            acceptQueue.removeAll { $0 == id }
        }
    }

    private func isPeerID(_ id: UInt32) -> Bool {
        role == .client ? id % 2 == 0 : id % 2 == 1
    }

    // MARK: Opening and accepting

    /// Opens a stream (WindowUpdate+SYN, sent at once as Go's yamux does); data may be
    /// written before the peer's ACK, and leaves in the same transport write as the SYN.
    public func open() throws(YamuxSessionError) -> YamuxStream {
        if let closedReason { throw closedReason }
        if remoteGoneAway { throw .remoteGoAway }
        let id = nextStreamID
        nextStreamID &+= 2
        let state = StreamState(window: configuration.window)
        state.openedAt = .now()
        streams[id] = state
        scheduleSweep()
        // The SYN rides with the first data (or leaves within the lazy delay).
        enqueueControl(YamuxHeader(type: .windowUpdate, flags: .syn, streamID: id, length: 0), lazy: true)
        return YamuxStream(id: id, session: self)
    }

    /// The next stream the peer opened (answered with ACK), or nil once the session ends.
    public func accept() async -> YamuxStream? {
        while acceptQueue.isEmpty {
            if closedReason != nil { return nil }
            await withCheckedContinuation { acceptWaiter = $0 }
        }
        // The ACK rides with the stream's first reply (or leaves within the lazy delay):
        // the opener does not wait for it to send.
        return acceptNow()
    }

    private var acceptHandler: ((YamuxStream) -> Void)?

    /// Push-mode accepting: each stream the peer opens from now on is accepted (ACK) and
    /// handed to `handler` synchronously, on the loop, instead of to ``accept()``.
    public func setAcceptHandler(_ handler: @escaping (YamuxStream) -> Void) {
        acceptHandler = handler
        while !acceptQueue.isEmpty, let stream = acceptNow() { handler(stream) }
    }

    private func acceptNow() -> YamuxStream? {
        guard !acceptQueue.isEmpty else { return nil }
        let id = acceptQueue.removeFirst()
        enqueueControl(YamuxHeader(type: .windowUpdate, flags: .ack, streamID: id, length: 0), lazy: true)
        return YamuxStream(id: id, session: self)
    }

    // MARK: Stream operations

    func read(_ id: UInt32) async throws(YamuxSessionError) -> [UInt8]? {
        while true {
            guard let state = streams[id] else {
                if let closedReason { throw closedReason }
                throw .streamReset
            }
            if state.wasReset { throw .streamReset }
            if !state.buffer.isEmpty {
                // Everything buffered at once (at most the window): one call per wake-up.
                var chunk = state.buffer[0]
                if state.buffer.count > 1 {
                    chunk.reserveCapacity(state.buffer.reduce(0) { $0 + $1.count })
                    for more in state.buffer.dropFirst() { chunk.append(contentsOf: more) }
                }
                state.buffer.removeAll(keepingCapacity: true)
                state.unacknowledged += UInt32(chunk.count)
                returnCreditIfDue(id, state)
                return chunk
            }
            if state.remoteFin {
                forgetIfDone(id, state)
                return nil
            }
            if let closedReason { throw closedReason }
            await withCheckedContinuation { state.readWaiter = $0 }
        }
    }

    func write(_ id: UInt32, _ bytes: [UInt8]) async throws(YamuxSessionError) {
        var offset = 0
        while offset < bytes.count {
            let state = try writableState(id)
            if state.sendWindow == 0 {
                await withCheckedContinuation { state.windowWaiters.append($0) }
                continue
            }
            if queuedData >= configuration.maxQueuedData {
                await withCheckedContinuation { spaceWaiters.append($0) }
                continue
            }
            // Everything the window and the queue allow now, then one flush.
            offset = enqueueData(id, state, bytes, from: offset)
            requestFlush()
        }
    }

    /// Queues all of `bytes` on stream `id` if its window and the outbound queue take them
    /// now (then flushes); false, with nothing queued, when ``YamuxStream/write(_:)`` would
    /// have to wait. Throws when the stream cannot be written at all.
    public func tryWrite(_ id: UInt32, _ bytes: [UInt8]) throws(YamuxSessionError) -> Bool {
        let state = try writableState(id)
        guard bytes.count <= Int(state.sendWindow), queuedData + bytes.count <= configuration.maxQueuedData else { return false }
        _ = enqueueData(id, state, bytes, from: 0)
        requestFlush()
        return true
    }

    /// Stream `id`'s state if it can be written now, else why not.
    private func writableState(_ id: UInt32) throws(YamuxSessionError) -> StreamState {
        guard let state = streams[id] else { throw closedReason ?? .streamReset }
        if state.wasReset { throw .streamReset }
        if state.localFin { throw .streamClosed }
        if let closedReason { throw closedReason }
        return state
    }

    /// Queues Data frames for `bytes[offset...]` while the stream's window and the outbound
    /// queue allow; returns how far it got.
    private func enqueueData(_ id: UInt32, _ state: StreamState, _ bytes: [UInt8], from offset: Int) -> Int {
        var offset = offset
        while offset < bytes.count, state.sendWindow > 0, queuedData < configuration.maxQueuedData {
            let n = min(bytes.count - offset, Int(state.sendWindow), configuration.maxDataFrame)
            state.sendWindow -= UInt32(n)
            var frame = YamuxHeader(type: .data, streamID: id, length: UInt32(n)).encoded
            frame.append(contentsOf: bytes[offset..<(offset + n)])
            dataQueue.append(frame)
            queuedData += n
            offset += n
        }
        return offset
    }

    /// Push mode: from now on this stream's inbound data, its end and its failure go to
    /// `sink`, synchronously on the loop, instead of to ``YamuxStream/read()`` (data is
    /// credited back as it is delivered). Lets a caller answer from the read itself.
    public func setSink(_ id: UInt32, _ sink: @escaping (YamuxStreamEvent) -> Void) {
        guard let state = streams[id] else {
            sink(.failed(closedReason ?? .streamReset))
            return
        }
        state.sink = sink
        while !state.buffer.isEmpty {
            let chunk = state.buffer.removeFirst()
            state.unacknowledged += UInt32(chunk.count)
            sink(.data(chunk))
        }
        returnCreditIfDue(id, state)
        if state.remoteFin { sink(.end) }
    }

    private func returnCreditIfDue(_ id: UInt32, _ state: StreamState) {
        if state.unacknowledged >= configuration.window / 2 && !state.remoteFin {
            enqueueControl(YamuxHeader(type: .windowUpdate, streamID: id, length: state.unacknowledged))
            state.receiveWindow += state.unacknowledged
            state.unacknowledged = 0
        }
    }

    /// FIN and stop reading on stream `id`: what is buffered or still arrives is dropped, so
    /// the stream is forgotten as soon as the peer's FIN arrives. (``close()`` ends the
    /// whole session.)
    public func closeStream(_ id: UInt32) {
        guard let state = streams[id] else { return }
        state.discarding = true
        state.buffer.removeAll()
        closeWrite(id)
        forgetIfDone(id, state)
    }

    func closeWrite(_ id: UInt32) {
        guard let state = streams[id], !state.localFin, !state.wasReset else { return }
        state.localFin = true
        if !state.remoteFin {
            state.closedAt = .now()
            scheduleSweep()
        }
        // Behind this stream's queued data, so the FIN cannot overtake it.
        dataQueue.append(YamuxHeader(type: .windowUpdate, flags: .fin, streamID: id, length: 0).encoded)
        // Nobody waits for a FIN: it rides with the next write or leaves within the lazy
        // delay.
        scheduleLazyFlush()
        forgetIfDone(id, state)
    }

    /// Aborts stream `id` (RST).
    public func resetStream(_ id: UInt32) { reset(id) }

    func reset(_ id: UInt32) {
        guard let state = streams[id] else { return }
        state.wasReset = true
        state.wakeAll()
        state.sink?(.failed(.streamReset))
        state.sink = nil
        streams[id] = nil
        enqueueControl(YamuxHeader(type: .windowUpdate, flags: .rst, streamID: id, length: 0))
    }

    private var sweepTimer: Scheduled<Void>?

    /// Arms the periodic check of open and close timeouts while there is something to check.
    private func scheduleSweep() {
        guard sweepTimer == nil, closedReason == nil else { return }
        sweepTimer = eventLoop.scheduleTask(in: configuration.sweepInterval) {
            self.assumeIsolated { $0.sweep() }
        }
    }

    private func sweep() {
        sweepTimer = nil
        guard closedReason == nil else { return }
        let now = NIODeadline.now()
        var pending = false
        for (id, state) in streams {
            if let openedAt = state.openedAt {
                if now - openedAt >= configuration.streamOpenTimeout {
                    fail(.protocolError("stream \(id) was not acknowledged within \(configuration.streamOpenTimeout)"))
                    return
                }
                pending = true
            }
            if let closedAt = state.closedAt, !state.remoteFin {
                if now - closedAt >= configuration.streamCloseTimeout {
                    reset(id)
                } else {
                    pending = true
                }
            }
        }
        if pending { scheduleSweep() }
    }

    private func forgetIfDone(_ id: UInt32, _ state: StreamState) {
        if state.localFin && state.remoteFin && (state.buffer.isEmpty || state.discarding) { streams[id] = nil }
    }

    /// Streams currently tracked (open in at least one direction).
    public var streamCount: Int { streams.count }

    // MARK: Ping, GoAway, close

    /// Sends a ping and waits for its answer, at most `timeout` (Go peers drop a session
    /// whose ping is not answered within 10 s).
    public func ping(timeout: Duration = .seconds(10)) async throws(YamuxSessionError) {
        if let closedReason { throw closedReason }
        let value = nextPing
        nextPing &+= 1
        enqueueControl(YamuxHeader(type: .ping, flags: .syn, streamID: 0, length: value))
        let (seconds, attoseconds) = timeout.components
        let timer = eventLoop.scheduleTask(in: .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)) {
            self.assumeIsolated { $0.expirePing(value) }
        }
        await withCheckedContinuation { pingWaiters[value] = $0 }
        timer.cancel()
        if let closedReason { throw closedReason }
        if expiredPings.remove(value) != nil { throw .pingTimeout }
    }

    private func expirePing(_ value: UInt32) {
        guard let waiter = pingWaiters.removeValue(forKey: value) else { return }
        expiredPings.insert(value)
        waiter.resume()
    }

    /// Tells the peer to open no more streams (code 0), or that the session is over.
    public func goAway(_ code: YamuxGoAwayCode = .normal) {
        enqueueControl(YamuxHeader(type: .goAway, streamID: 0, length: code.rawValue))
    }

    /// Closes the session: queued frames (data included) are written, then the transport
    /// is closed. (Like yamux v0.1.2, no GoAway is sent.)
    public func close() {
        fail(.sessionClosed, flushData: true)
    }

    /// Closes the session from any thread (for cancellation handlers).
    public nonisolated func closeSoon() {
        eventLoop.execute { self.assumeIsolated { $0.close() } }
    }

    private func protocolFailure(_ text: String) {
        guard closedReason == nil else { return }
        enqueueControl(YamuxHeader(type: .goAway, streamID: 0, length: YamuxGoAwayCode.protocolError.rawValue))
        fail(.protocolError(text))
    }

    private func fail(_ reason: YamuxSessionError, flushData: Bool = false) {
        guard closedReason == nil else { return }
        closedReason = reason
        for state in streams.values {
            state.wakeAll()
            state.sink?(.failed(reason))
            state.sink = nil
        }
        acceptWaiter?.resume()
        acceptWaiter = nil
        for waiter in pingWaiters.values { waiter.resume() }
        pingWaiters.removeAll()
        for waiter in spaceWaiters { waiter.resume() }
        spaceWaiters.removeAll()
        for waiter in closeWaiters { waiter.resume() }
        closeWaiters.removeAll()
        sweepTimer?.cancel()
        sweepTimer = nil
        // What is queued (a GoAway, say, or the last data on close) goes out first.
        var last = allocator.buffer(bytes: control)
        control = []
        if flushData {
            while dataHead < dataQueue.count {
                last.writeBytes(dataQueue[dataHead])
                dataHead += 1
            }
        }
        dataQueue = []
        dataHead = 0
        queuedData = 0
        if last.readableBytes > 0 { transport.write(last) }
        transport.close()
    }

    // MARK: Writer

    private func enqueueControl(_ header: YamuxHeader, lazy: Bool = false) {
        guard closedReason == nil else { return }
        control += header.encoded
        if lazy { scheduleLazyFlush() } else { requestFlush() }
    }

    private var receiving = false
    private var needsFlush = false

    /// Writes now, or at the end of the `receive` in progress (one write per chunk read).
    private func requestFlush() {
        if receiving { needsFlush = true } else { flush() }
    }

    private var lazyTimer: Scheduled<Void>?

    private func scheduleLazyFlush() {
        guard lazyTimer == nil else { return }
        lazyTimer = eventLoop.scheduleTask(in: configuration.lazyDelay) {
            self.assumeIsolated { session in
                session.lazyTimer = nil
                session.flush()
            }
        }
    }

    /// Largest batch handed to the transport in one write.
    public static let maxBatch = 256 * 1024

    /// Writes control frames, then data frames while the transport is writable, in
    /// batches of up to ``maxBatch``; what is left waits for ``transportWritable()``.
    private func flush() {
        needsFlush = false
        lazyTimer?.cancel()
        lazyTimer = nil
        guard closedReason == nil else { return }
        var pendingControl = control
        control = []
        repeat {
            // Sized first, then filled: each byte is copied once, into the buffer the
            // transport sends.
            var end = dataHead
            var size = pendingControl.count
            if transport.isWritable {
                while end < dataQueue.count, size < Self.maxBatch {
                    size += dataQueue[end].count
                    end += 1
                }
            }
            if size > 0 {
                var batch = allocator.buffer(capacity: size)
                batch.writeBytes(pendingControl)
                pendingControl = []
                while dataHead < end {
                    let frame = dataQueue[dataHead]
                    dataHead += 1
                    queuedData -= max(0, frame.count - YamuxHeader.size)
                    batch.writeBytes(frame)
                }
                transport.write(batch)
            }
        } while dataHead < dataQueue.count && transport.isWritable
        if dataHead == dataQueue.count {
            dataQueue.removeAll(keepingCapacity: true)
            dataHead = 0
        } else if dataHead >= 64 {
            dataQueue.removeFirst(dataHead)
            dataHead = 0
        }
        if queuedData < configuration.maxQueuedData, !spaceWaiters.isEmpty {
            for waiter in spaceWaiters { waiter.resume() }
            spaceWaiters.removeAll()
        }
    }
}
