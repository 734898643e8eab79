/// A yamux session (spec agent-rpc §2) over any ``YamuxTransport``.
///
/// The owner feeds received bytes with ``receive(_:)`` (split anywhere) and reports EOF
/// with ``transportClosed()``. One writer task sends frames in order, control frames
/// (pings, window updates, opens, closes) ahead of queued data, so pings are answered
/// promptly even under bulk transfer.
///
/// Bounds: each stream buffers at most its receive window (256 KiB, enforced against the
/// peer); queued outbound data is capped at ``Configuration/maxQueuedData`` (writers
/// wait); at most ``Configuration/acceptBacklog`` unaccepted streams (more are refused
/// with RST).
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
        /// Largest Data frame we send.
        public var maxDataFrame: Int = 64 * 1024

        public init() {}
    }

    private final class StreamState {
        var buffer: [[UInt8]] = []
        var buffered = 0
        /// Credit we still grant the peer.
        var receiveWindow: UInt32
        /// Consumed by the reader but not yet returned to the peer.
        var unacknowledged: UInt32 = 0
        /// Credit the peer granted us.
        var sendWindow: UInt32
        var localFin = false
        var remoteFin = false
        var wasReset = false
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
    public let configuration: Configuration
    private let transport: any YamuxTransport
    private var decoder: YamuxFrameDecoder
    private var streams: [UInt32: StreamState] = [:]
    private var nextStreamID: UInt32
    private var acceptQueue: [UInt32] = []
    private var acceptWaiter: CheckedContinuation<Void, Never>?
    private var remoteGoneAway = false
    private var closedReason: YamuxSessionError?

    private var controlQueue: [[UInt8]] = []
    private var dataQueue: [[UInt8]] = []
    private var queuedData = 0
    private var writerWaiter: CheckedContinuation<Void, Never>?
    private var spaceWaiters: [CheckedContinuation<Void, Never>] = []
    private var writerTask: Task<Void, Never>?
    private var flushDataOnClose = false

    private var nextPing: UInt32 = 0
    private var pingWaiters: [UInt32: CheckedContinuation<Void, Never>] = [:]
    private var expiredPings: Set<UInt32> = []

    public init(role: Role, transport: any YamuxTransport, configuration: Configuration = Configuration()) {
        self.role = role
        self.transport = transport
        self.configuration = configuration
        self.decoder = YamuxFrameDecoder(maxPayload: configuration.window)
        self.nextStreamID = role == .client ? 1 : 2
    }

    /// Starts the writer. Call once, before anything else.
    public func start() {
        guard writerTask == nil else { return }
        writerTask = Task { [weak self] in
            while let self, let frame = await self.nextOutbound() {
                do {
                    try await self.transport.write(frame)
                } catch {
                    await self.fail(.sessionClosed, fromWriter: true)
                    return
                }
            }
        }
    }

    /// Why the session ended, or nil while it is open.
    public var closeReason: YamuxSessionError? { closedReason }

    // MARK: Inbound

    /// Feeds bytes read from the transport.
    public func receive(_ bytes: [UInt8]) async {
        guard closedReason == nil else { return }
        decoder.feed(bytes)
        while closedReason == nil {
            let frame: YamuxFrame?
            do {
                frame = try decoder.next()
            } catch {
                await protocolFailure(error.description)
                return
            }
            guard let frame else { return }
            await handle(frame)
        }
    }

    /// The transport reached EOF or failed: everything ends.
    public func transportClosed() async {
        await fail(.sessionClosed)
    }

    private func handle(_ frame: YamuxFrame) async {
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
                await fail(.protocolError("remote GoAway code \(header.length)"))
            }
        case .data, .windowUpdate:
            await handleStreamFrame(frame)
        }
    }

    private func handleStreamFrame(_ frame: YamuxFrame) async {
        let header = frame.header
        let id = header.streamID
        if header.flags.contains(.syn) {
            guard id != 0, isPeerID(id), streams[id] == nil else {
                await protocolFailure("invalid or duplicate SYN for stream \(id)")
                return
            }
            if acceptQueue.count >= configuration.acceptBacklog || closedReason != nil {
                enqueueControl(YamuxHeader(type: .windowUpdate, flags: .rst, streamID: id, length: 0))
                return
            }
            streams[id] = StreamState(window: configuration.window)
            acceptQueue.append(id)
            acceptWaiter?.resume()
            acceptWaiter = nil
        }
        guard let state = streams[id] else { return } // unknown stream: discard
        if header.type == .windowUpdate, header.length > 0 {
            state.sendWindow = state.sendWindow &+ header.length
            for waiter in state.windowWaiters { waiter.resume() }
            state.windowWaiters.removeAll()
        }
        if header.type == .data, !frame.payload.isEmpty {
            guard UInt32(frame.payload.count) <= state.receiveWindow else {
                await protocolFailure("stream \(id) sent \(frame.payload.count) bytes beyond its window")
                return
            }
            state.receiveWindow -= UInt32(frame.payload.count)
            state.buffer.append(frame.payload)
            state.buffered += frame.payload.count
            state.readWaiter?.resume()
            state.readWaiter = nil
        }
        if header.flags.contains(.fin) {
            state.remoteFin = true
            state.readWaiter?.resume()
            state.readWaiter = nil
            forgetIfDone(id, state)
        }
        if header.flags.contains(.rst) {
            state.wasReset = true
            state.wakeAll()
            streams[id] = nil
            acceptQueue.removeAll { $0 == id }
        }
    }

    private func isPeerID(_ id: UInt32) -> Bool {
        role == .client ? id % 2 == 0 : id % 2 == 1
    }

    // MARK: Opening and accepting

    /// Opens a stream (WindowUpdate+SYN, sent at once as Go's yamux does); data may be
    /// written before the peer's ACK, and the writer batches the SYN with it when it can.
    public func open() throws(YamuxSessionError) -> YamuxStream {
        if let closedReason { throw closedReason }
        if remoteGoneAway { throw .remoteGoAway }
        let id = nextStreamID
        nextStreamID &+= 2
        streams[id] = StreamState(window: configuration.window)
        enqueueControl(YamuxHeader(type: .windowUpdate, flags: .syn, streamID: id, length: 0))
        return YamuxStream(id: id, session: self)
    }

    /// The next stream the peer opened (answered with ACK), or nil once the session ends.
    public func accept() async -> YamuxStream? {
        while acceptQueue.isEmpty {
            if closedReason != nil { return nil }
            await withCheckedContinuation { acceptWaiter = $0 }
        }
        let id = acceptQueue.removeFirst()
        enqueueControl(YamuxHeader(type: .windowUpdate, flags: .ack, streamID: id, length: 0))
        return YamuxStream(id: id, session: self)
    }

    // MARK: Stream operations

    func read(_ id: UInt32) async throws -> [UInt8]? {
        while true {
            guard let state = streams[id] else {
                if let closedReason { throw closedReason }
                throw YamuxSessionError.streamReset
            }
            if state.wasReset { throw YamuxSessionError.streamReset }
            if !state.buffer.isEmpty {
                let chunk = state.buffer.removeFirst()
                state.buffered -= chunk.count
                state.unacknowledged += UInt32(chunk.count)
                if state.unacknowledged >= configuration.window / 2 && !state.remoteFin {
                    enqueueControl(YamuxHeader(type: .windowUpdate, streamID: id, length: state.unacknowledged))
                    state.receiveWindow += state.unacknowledged
                    state.unacknowledged = 0
                }
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

    func write(_ id: UInt32, _ bytes: [UInt8]) async throws {
        var offset = 0
        while offset < bytes.count {
            guard let state = streams[id] else { throw closedReason ?? YamuxSessionError.streamReset }
            if state.wasReset { throw YamuxSessionError.streamReset }
            if state.localFin { throw YamuxSessionError.streamClosed }
            if let closedReason { throw closedReason }
            if state.sendWindow == 0 {
                await withCheckedContinuation { state.windowWaiters.append($0) }
                continue
            }
            if queuedData >= configuration.maxQueuedData {
                await withCheckedContinuation { spaceWaiters.append($0) }
                continue
            }
            let n = min(bytes.count - offset, Int(state.sendWindow), configuration.maxDataFrame)
            state.sendWindow -= UInt32(n)
            var frame = YamuxHeader(type: .data, streamID: id, length: UInt32(n)).encoded
            frame.append(contentsOf: bytes[offset..<(offset + n)])
            dataQueue.append(frame)
            queuedData += n
            wakeWriter()
            offset += n
        }
    }

    func closeWrite(_ id: UInt32) {
        guard let state = streams[id], !state.localFin, !state.wasReset else { return }
        state.localFin = true
        // Behind this stream's queued data, so the FIN cannot overtake it.
        dataQueue.append(YamuxHeader(type: .windowUpdate, flags: .fin, streamID: id, length: 0).encoded)
        wakeWriter()
        forgetIfDone(id, state)
    }

    func reset(_ id: UInt32) {
        guard let state = streams[id] else { return }
        state.wasReset = true
        state.wakeAll()
        streams[id] = nil
        enqueueControl(YamuxHeader(type: .windowUpdate, flags: .rst, streamID: id, length: 0))
    }

    private func forgetIfDone(_ id: UInt32, _ state: StreamState) {
        if state.localFin && state.remoteFin && state.buffer.isEmpty { streams[id] = nil }
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
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            await self?.expirePing(value)
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

    /// Closes the session: queued frames (data included) are flushed, then the transport
    /// is closed. (Like yamux v0.1.2, no GoAway is sent.)
    public func close() async {
        flushDataOnClose = true
        await fail(.sessionClosed)
    }

    private func protocolFailure(_ text: String) async {
        guard closedReason == nil else { return }
        enqueueControl(YamuxHeader(type: .goAway, streamID: 0, length: YamuxGoAwayCode.protocolError.rawValue))
        await fail(.protocolError(text))
    }

    private func fail(_ reason: YamuxSessionError, fromWriter: Bool = false) async {
        guard closedReason == nil else { return }
        closedReason = reason
        for state in streams.values { state.wakeAll() }
        acceptWaiter?.resume()
        acceptWaiter = nil
        for waiter in pingWaiters.values { waiter.resume() }
        pingWaiters.removeAll()
        for waiter in spaceWaiters { waiter.resume() }
        spaceWaiters.removeAll()
        wakeWriter()
        // Let the writer flush what is queued (a GoAway, say), then close the transport.
        if !fromWriter, let writerTask { await writerTask.value }
        await transport.close()
    }

    // MARK: Writer

    private func enqueueControl(_ header: YamuxHeader) {
        guard closedReason == nil || header.type == .goAway else { return }
        controlQueue.append(header.encoded)
        wakeWriter()
    }

    private func wakeWriter() {
        writerWaiter?.resume()
        writerWaiter = nil
    }

    /// Largest batch of frames handed to the transport in one write.
    static let maxBatch = 256 * 1024

    /// The next frames to send as one write (control frames first, then data, up to
    /// ``maxBatch`` bytes): fewer transport messages and wake-ups per round trip.
    /// nil when closed and drained.
    private func nextOutbound() async -> [UInt8]? {
        while true {
            var batch: [UInt8] = []
            while !controlQueue.isEmpty { batch += controlQueue.removeFirst() }
            let sendData = closedReason == nil || flushDataOnClose
            while sendData, !dataQueue.isEmpty, batch.count < Self.maxBatch {
                let frame = dataQueue.removeFirst()
                queuedData -= max(0, frame.count - YamuxHeader.size)
                batch += frame
            }
            if queuedData < configuration.maxQueuedData, !spaceWaiters.isEmpty {
                for waiter in spaceWaiters { waiter.resume() }
                spaceWaiters.removeAll()
            }
            if !batch.isEmpty { return batch }
            if closedReason != nil { return nil }
            await withCheckedContinuation { writerWaiter = $0 }
        }
    }
}
