import Testing
@testable import Yamux

/// The session's protocol engine driven directly, byte by byte, with no event loop.
struct YamuxSessionStateMachineTests {
    typealias Machine = YamuxSessionStateMachine

    @Test func openQueuesASynThatRidesWithTheFirstData() throws {
        let driver = Driver(role: .client)
        let (id, actions) = try driver.machine.open(now: .zero)
        #expect(id == 1)
        driver.perform(actions)
        // The SYN waits for the lazy delay (or a write to ride with); nothing is written yet.
        #expect(driver.lazyFlushArmed)
        #expect(driver.sweepArmed)
        #expect(driver.writes.isEmpty)

        driver.perform(try #require(try driver.machine.tryWrite(id, [0xAA, 0xBB, 0xCC])))
        #expect(
            driver.writes == [
                [0x00, 0x01, 0x00, 0x01, 0, 0, 0, 1, 0, 0, 0, 0]  // WindowUpdate+SYN, stream 1
                    + [0x00, 0x00, 0x00, 0x00, 0, 0, 0, 1, 0, 0, 0, 3, 0xAA, 0xBB, 0xCC]  // Data, 3 bytes
            ])
        #expect(!driver.lazyFlushArmed)

        // A lone SYN leaves when the lazy timer fires.
        let (next, more) = try driver.machine.open(now: .zero)
        #expect(next == 3)
        driver.perform(more)
        driver.fireLazyTimer()
        #expect(driver.writes.last == [0x00, 0x01, 0x00, 0x01, 0, 0, 0, 3, 0, 0, 0, 0])
    }

    @Test func dataBeyondTheWindowWaitsForAWindowUpdate() throws {
        let driver = Driver(role: .client)
        let id = try driver.open()
        let window = Int(YamuxHeader.initialWindow)
        let payload = [UInt8](repeating: 7, count: window + 10)

        guard case .queued(let end, let actions) = try driver.machine.write(id, payload, from: 0) else {
            Issue.record("expected the window's worth to be queued")
            return
        }
        #expect(end == window)
        driver.perform(actions)
        // After the SYN's write: the whole window as four 64 KiB Data frames, in one write.
        #expect(driver.writes.count == 2)
        let sent = driver.writes.flatMap { $0 }
        #expect(sent.count == 12 + 4 * (12 + 64 * 1024))
        #expect(Array(sent[12..<24]) == YamuxHeader(type: .data, streamID: id, length: 64 * 1024).encoded)
        let refused = try driver.machine.tryWrite(id, [1])
        #expect(refused == nil)

        // The rest waits: the window is used up.
        guard case .waitForWindow = try driver.machine.write(id, payload, from: end) else {
            Issue.record("expected the writer to wait for credit")
            return
        }
        let writer = driver.machine.waitForWindow(id)
        driver.writes.removeAll()

        // The peer returns 10 bytes of credit: the writer wakes and the rest goes.
        driver.receive(YamuxHeader(type: .windowUpdate, streamID: id, length: 10).encoded)
        #expect(driver.resumed == [writer])
        guard case .queued(let last, let more) = try driver.machine.write(id, payload, from: end) else {
            Issue.record("expected the rest to be queued")
            return
        }
        #expect(last == payload.count)
        driver.perform(more)
        #expect(driver.writes == [YamuxHeader(type: .data, streamID: id, length: 10).encoded + [UInt8](repeating: 7, count: 10)])
    }

    /// Window updates that add up past 4 GiB saturate the send window instead of wrapping it
    /// to a few bytes (a stream that would stall for no reason).
    @Test func windowUpdatesSaturate() throws {
        let driver = Driver(role: .client)
        let id = try driver.open()
        driver.receive(YamuxHeader(type: .windowUpdate, streamID: id, length: .max).encoded)
        driver.receive(YamuxHeader(type: .windowUpdate, streamID: id, length: 1000).encoded)
        #expect(driver.machine.streams[id]?.sendWindow == .max)
    }

    /// A writer waiting for credit when its stream is closed (a reply that came before the
    /// request was fully sent) wakes and finds the stream closed, rather than waiting on a
    /// stream the peer's FIN then forgets.
    @Test func aWriterWaitingForCreditWakesWhenTheStreamIsClosed() throws {
        let driver = Driver(role: .client)
        let id = try driver.open()
        let payload = [UInt8](repeating: 7, count: Int(YamuxHeader.initialWindow) + 10)
        guard case .queued(let end, let actions) = try driver.machine.write(id, payload, from: 0) else {
            Issue.record("expected the window's worth to be queued")
            return
        }
        driver.perform(actions)
        guard case .waitForWindow = try driver.machine.write(id, payload, from: end) else {
            Issue.record("expected the writer to wait for credit")
            return
        }
        let writer = driver.machine.waitForWindow(id)
        driver.perform(driver.machine.closeStream(id, now: .zero))
        #expect(driver.resumed == [writer])
        #expect(throws: YamuxSessionError.streamClosed) { try driver.machine.write(id, payload, from: end) }
        driver.receive(YamuxHeader(type: .windowUpdate, flags: .fin, streamID: id, length: 0).encoded)
        #expect(driver.resumed == [writer], "nobody else was waiting")
    }

    @Test func aFinFromThePeerEndsReadingAndTheStreamIsForgotten() throws {
        let driver = Driver(role: .server)
        driver.receive(
            YamuxHeader(type: .windowUpdate, flags: .syn, streamID: 1, length: 0).encoded
                + YamuxFrame(header: YamuxHeader(type: .data, streamID: 1, length: 2), payload: [4, 2]).encoded)
        guard case .stream(let id, let actions) = driver.machine.accept() else {
            Issue.record("expected a stream to accept")
            return
        }
        #expect(id == 1)
        driver.perform(actions)

        guard case .data(let chunk, _) = try driver.machine.read(id) else {
            Issue.record("expected the buffered data")
            return
        }
        #expect(chunk == [4, 2])
        guard case .wait = try driver.machine.read(id) else {
            Issue.record("expected the reader to wait")
            return
        }
        let reader = driver.machine.waitToRead(id)

        driver.receive(YamuxHeader(type: .windowUpdate, flags: .fin, streamID: 1, length: 0).encoded)
        #expect(driver.resumed == [reader])
        guard case .end = try driver.machine.read(id) else {
            Issue.record("expected the end of the stream")
            return
        }
        // Our side is still open: we may answer, then close, and the stream is gone.
        #expect(driver.machine.streamCount == 1)
        driver.perform(try #require(try driver.machine.tryWrite(id, [9])))
        driver.perform(driver.machine.closeWrite(id, now: .zero))
        #expect(driver.machine.streamCount == 0)
        driver.fireLazyTimer()
        let sent = driver.writes.flatMap { $0 }
        #expect(
            sent == YamuxHeader(type: .windowUpdate, flags: .ack, streamID: 1, length: 0).encoded
                + YamuxFrame(header: YamuxHeader(type: .data, streamID: 1, length: 1), payload: [9]).encoded
                + YamuxHeader(type: .windowUpdate, flags: .fin, streamID: 1, length: 0).encoded)
    }

    @Test func anRSTFromThePeerWakesAndFailsTheStream() throws {
        let driver = Driver(role: .client)
        let id = try driver.open()
        let sunk = try driver.open()
        let events = EventRecorder()
        driver.run(driver.machine.setSink(sunk, events.sink))
        guard case .wait = try driver.machine.read(id) else {
            Issue.record("expected the reader to wait")
            return
        }
        let reader = driver.machine.waitToRead(id)

        driver.receive(
            YamuxHeader(type: .windowUpdate, flags: .rst, streamID: id, length: 0).encoded
                + YamuxHeader(type: .windowUpdate, flags: .rst, streamID: sunk, length: 0).encoded)
        #expect(driver.resumed == [reader])
        #expect(events.events == ["failed yamux: connection reset"])
        #expect(throws: YamuxSessionError.streamReset) { try driver.machine.read(id) }
        #expect(throws: YamuxSessionError.streamReset) { try driver.machine.tryWrite(id, [1]) }
        #expect(driver.machine.streamCount == 0)
        #expect(driver.machine.closeReason == nil)
    }

    @Test func pingsAreAnsweredAndOursCompleteOnTheirAnswer() throws {
        let driver = Driver(role: .client)
        // The peer's ping is answered with the same value.
        driver.receive(YamuxHeader(type: .ping, flags: .syn, streamID: 0, length: 0xDEAD_BEEF).encoded)
        #expect(driver.writes == [[0x00, 0x02, 0x00, 0x02, 0, 0, 0, 0, 0xDE, 0xAD, 0xBE, 0xEF]])

        // Ours goes at once and completes when its answer arrives.
        let (value, actions) = try driver.machine.ping()
        driver.perform(actions)
        #expect(driver.writes.last == [0x00, 0x02, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, value.lowByte])
        let waiter = driver.machine.waitForPingAnswer(value)
        driver.receive(YamuxHeader(type: .ping, flags: .ack, streamID: 0, length: value).encoded)
        #expect(driver.resumed == [waiter])
        try driver.machine.pingEnded(value)

        // One that is never answered times out.
        let (lost, more) = try driver.machine.ping()
        driver.perform(more)
        let lostWaiter = driver.machine.waitForPingAnswer(lost)
        driver.perform(driver.machine.pingExpired(lost))
        #expect(driver.resumed.last == lostWaiter)
        #expect(throws: YamuxSessionError.pingTimeout) { try driver.machine.pingEnded(lost) }
        #expect(driver.machine.closeReason == nil)
    }

    @Test func goAwayNormalStopsOpensAndAnyOtherCodeEndsTheSession() throws {
        let driver = Driver(role: .client)
        driver.perform(driver.machine.goAway(.normal))
        #expect(driver.writes == [[0x00, 0x03, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0]])

        driver.receive(YamuxHeader(type: .goAway, streamID: 0, length: YamuxGoAwayCode.normal.rawValue).encoded)
        #expect(throws: YamuxSessionError.remoteGoAway) { try driver.machine.open(now: .zero) }
        #expect(driver.machine.closeReason == nil)

        driver.receive(YamuxHeader(type: .goAway, streamID: 0, length: YamuxGoAwayCode.internalError.rawValue).encoded)
        #expect(driver.machine.closeReason == .protocolError("remote GoAway code 2"))
        #expect(driver.transportClosed)
        #expect(driver.writes.count == 1)  // no GoAway of ours in answer
    }

    @Test func aBadVersionByteFailsTheSessionWithGoAway() throws {
        let driver = Driver(role: .server)
        let events = EventRecorder()
        driver.receive(YamuxHeader(type: .windowUpdate, flags: .syn, streamID: 1, length: 0).encoded)
        guard case .stream(let id, let actions) = driver.machine.accept() else {
            Issue.record("expected a stream to accept")
            return
        }
        driver.perform(actions)
        driver.fireLazyTimer()  // the ACK
        driver.writes.removeAll()
        driver.run(driver.machine.setSink(id, events.sink))
        guard case .wait = driver.machine.accept() else {
            Issue.record("expected accept to wait")
            return
        }
        let acceptor = driver.machine.waitToAccept()

        driver.receive([1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0])
        #expect(driver.machine.closeReason == .protocolError("yamux: unsupported protocol version 1"))
        #expect(driver.writes == [[0x00, 0x03, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 1]])  // GoAway(protocol error)
        #expect(driver.transportClosed)
        #expect(driver.resumed == [acceptor])
        #expect(events.events == ["failed yamux: protocol error: yamux: unsupported protocol version 1"])
        guard case .ended = driver.machine.accept() else {
            Issue.record("expected accept to end")
            return
        }
        // Nothing more is read or written.
        let job = driver.machine.receive([0, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0])
        #expect(job == nil)
        let flush = driver.machine.startFlush()
        #expect(flush == nil)
    }

    @Test func theAcceptBacklogIsBoundedAndTheRestIsRefused() throws {
        var configuration = Machine.Configuration(YamuxSession.Configuration())
        configuration.acceptBacklog = 2
        let driver = Driver(role: .server, configuration: configuration)
        driver.receive([1, 3, 5].flatMap { YamuxHeader(type: .windowUpdate, flags: .syn, streamID: $0, length: 0).encoded })
        #expect(driver.machine.acceptQueue == [1, 3])
        #expect(driver.machine.streamCount == 2)
        #expect(driver.writes == [YamuxHeader(type: .windowUpdate, flags: .rst, streamID: 5, length: 0).encoded])

        // Once one is accepted there is room again.
        guard case .stream(1, let actions) = driver.machine.accept() else {
            Issue.record("expected stream 1")
            return
        }
        driver.perform(actions)
        driver.receive(YamuxHeader(type: .windowUpdate, flags: .syn, streamID: 7, length: 0).encoded)
        #expect(driver.machine.acceptQueue == [3, 7])
        #expect(driver.machine.closeReason == nil)
    }

    /// A sink that closes its stream on the reply (as a unary call does) still hears the FIN
    /// that came in the same frame, and the stream is forgotten.
    @Test func aSinkThatClosesItsStreamStillHearsTheFinOfTheSameFrame() throws {
        let driver = Driver(role: .client)
        let id = try driver.open()
        let events = EventRecorder()
        events.onData = { [unowned driver] in driver.perform(driver.machine.closeStream(id, now: .zero)) }
        driver.run(driver.machine.setSink(id, events.sink))
        driver.receive(YamuxFrame(header: YamuxHeader(type: .data, flags: [.ack, .fin], streamID: id, length: 2), payload: [1, 2]).encoded)
        #expect(events.events == ["data 2", "end"])
        #expect(driver.machine.streamCount == 0)
        #expect(driver.machine.retired.isEmpty)
        driver.fireLazyTimer()
        #expect(driver.writes.last == YamuxHeader(type: .windowUpdate, flags: .fin, streamID: id, length: 0).encoded)
    }

    @Test func aStreamThePeerNeverAnswersEndsTheSession() throws {
        let driver = Driver(role: .client)
        let id = try driver.open()
        driver.sweep(now: .seconds(74))
        #expect(driver.machine.closeReason == nil)
        #expect(driver.sweepArmed)
        driver.sweep(now: .seconds(75))
        #expect(driver.machine.closeReason == .protocolError("stream \(id) was not acknowledged within 75 s"))
        #expect(driver.transportClosed)
    }
}

/// Performs a machine's actions the way ``YamuxSession`` does, recording them. A class, so
/// that a sink can call back into the machine as an application's does into the session.
final class Driver {
    var machine: YamuxSessionStateMachine
    /// What went to the transport, one element per write.
    var writes: [[UInt8]] = []
    var transportWritable = true
    var transportClosed = false
    var lazyFlushArmed = false
    var sweepArmed = false
    /// Suspended callers woken, in order.
    var resumed: [YamuxSessionStateMachine.WaiterID] = []
    /// Streams handed to the accept handler.
    var accepted: [UInt32] = []

    init(role: YamuxSession.Role, configuration: YamuxSessionStateMachine.Configuration = .init(YamuxSession.Configuration())) {
        machine = YamuxSessionStateMachine(role: role, configuration: configuration)
    }

    /// Opens a stream and writes its SYN.
    func open() throws -> UInt32 {
        let (id, actions) = try machine.open(now: .zero)
        perform(actions)
        flush()
        return id
    }

    func receive(_ bytes: [UInt8]) {
        guard let job = machine.receive(bytes) else { return }
        run(job)
        if machine.endReceive() { flush() }
    }

    func fireLazyTimer() {
        lazyFlushArmed = false
        flush()
    }

    func sweep(now: Duration) {
        sweepArmed = false
        run(machine.sweep(now: now))
    }

    func run(_ job: YamuxSessionStateMachine.Job) {
        var job = job
        while let actions = machine.step(&job) { perform(actions) }
    }

    func flush() {
        lazyFlushArmed = false
        guard var pending = machine.startFlush() else { return }
        while let write = machine.nextWrite(&pending, transportWritable: transportWritable) {
            #expect(write.bytes.count == write.byteCount)
            writes.append(write.bytes)
        }
        perform(machine.finishFlush())
    }

    func perform(_ actions: [YamuxSessionStateMachine.Action]) {
        for action in actions {
            switch action {
            case .flush: flush()
            case .scheduleLazyFlush: lazyFlushArmed = true
            case .scheduleSweep: sweepArmed = true
            case .cancelSweep: sweepArmed = false
            case .resume(let ids): resumed += ids
            case .deliver(let sink, let event): sink(event)
            case .accept(let id): accepted.append(id)
            case .run(let job): run(job)
            case .closeTransport(let finalWrite):
                if let finalWrite { writes.append(finalWrite.bytes) }
                transportClosed = true
            }
        }
    }
}

/// Records what a push-mode stream's sink receives, as "data N", "end", "failed <error>".
final class EventRecorder {
    var events: [String] = []
    /// Runs after each data event is recorded.
    var onData: () -> Void = {}

    var sink: YamuxSessionStateMachine.Sink {
        { [self] event in
            switch event {
            case .data(let bytes):
                events.append("data \(bytes.count)")
                onData()
            case .end: events.append("end")
            case .failed(let error): events.append("failed \(error)")
            }
        }
    }
}

extension UInt32 {
    fileprivate var lowByte: UInt8 { UInt8(truncatingIfNeeded: self) }
}
