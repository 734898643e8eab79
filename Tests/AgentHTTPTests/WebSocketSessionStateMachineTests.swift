@testable import AgentHTTP
import AgentTestSupport
import NIOCore
import NIOWebSocket
import Testing

/// The WebSocket session's rules as sequences of events with a manual clock: no socket, no
/// sleep. Message bounds and UTF-8 are the pipeline's guard's (`WebSocketMessageBoundTests`).
@Suite struct WebSocketSessionStateMachineTests {
    typealias Machine = WebSocketSessionStateMachine<ManualClock>
    typealias Action = Machine.Action

    /// A machine, its clock, and the close timer's deadline (the driver's part).
    struct Driver {
        var machine = Machine(configuration: .init(closeTimeout: .seconds(2)))
        let clock = ManualClock()
        var timer: ManualClock.Instant?

        mutating func record(_ actions: [Action]) -> [Action] {
            for case .armCloseTimer(let delay) in actions { timer = clock.now.advanced(by: delay) }
            return actions
        }

        mutating func frame(_ opcode: WebSocketOpcode, fin: Bool = true, rsv: Bool = false, _ data: ByteBuffer = ByteBuffer()) -> [Action] {
            record(machine.received(opcode: opcode, fin: fin, reservedBits: rsv, data: data, now: clock.now))
        }

        mutating func text(_ text: String, fin: Bool = true) -> [Action] { frame(.text, fin: fin, ByteBuffer(string: text)) }

        mutating func handlerEnded(_ code: WebSocketErrorCode = .normalClosure) -> [Action] {
            record(machine.handlerEnded(code, now: clock.now))
        }

        /// Moves the clock; the close timer fires if it came due.
        mutating func advance(_ duration: Duration) -> [Action] {
            clock.advance(by: duration)
            guard let timer, clock.now >= timer else { return [] }
            self.timer = nil
            return machine.closeTimerFired(now: clock.now)
        }
    }

    static func close(_ code: UInt16?) -> ByteBuffer {
        var buffer = ByteBuffer()
        if let code { buffer.writeInteger(code) }
        return buffer
    }

    static let protocolErrorClose: [Action] = [.finishInbound, .armCloseTimer(.seconds(2)), .sendClose(.protocolError, reason: nil)]

    @Test func aPingIsAnsweredWithItsPayload() {
        var driver = Driver()
        let payload = ByteBuffer(string: "are you there")
        #expect(driver.frame(.ping, payload) == [.sendPong(payload)])
        #expect(driver.frame(.pong, payload) == [])
        #expect(driver.machine.state == .open)
    }

    @Test func aPingAfterOurCloseIsNotAnswered() {
        var driver = Driver()
        _ = driver.handlerEnded()
        #expect(driver.frame(.ping, ByteBuffer(string: "x")) == [])
    }

    @Test func dataFramesAndFragmentsAreDeliveredInOrder() {
        var driver = Driver()
        #expect(driver.text("he", fin: false) == [.deliver(.init(opcode: .text, data: ByteBuffer(string: "he"), fin: false))])
        // A control frame may come between fragments.
        #expect(driver.frame(.ping) == [.sendPong(ByteBuffer())])
        #expect(
            driver.frame(.continuation, fin: true, ByteBuffer(string: "llo"))
                == [.deliver(.init(opcode: .continuation, data: ByteBuffer(string: "llo"), fin: true))])
        #expect(driver.frame(.binary, ByteBuffer(bytes: [1, 2])) == [.deliver(.init(opcode: .binary, data: ByteBuffer(bytes: [1, 2]), fin: true))])
    }

    @Test(arguments: [
        (UInt16?.none, WebSocketErrorCode.normalClosure), (1000, .normalClosure), (1001, .normalClosure), (1003, .normalClosure),
        (1007, .normalClosure), (1011, .normalClosure), (3000, .normalClosure), (4999, .normalClosure),
        (999, .protocolError), (1004, .protocolError), (1005, .protocolError), (1006, .protocolError), (1012, .protocolError),
        (2999, .protocolError), (5000, .protocolError),
    ])
    func aClientsCloseIsAnswered(code: UInt16?, answer: WebSocketErrorCode) {
        var driver = Driver()
        #expect(driver.frame(.connectionClose, Self.close(code)) == [.finishInbound, .armCloseTimer(.seconds(2)), .sendClose(answer, reason: nil)])
        #expect(!driver.machine.mayWrite)
        // The route returns: nothing left to wait for.
        #expect(driver.handlerEnded() == [.closeChannel])
        #expect(driver.machine.state == .closed)
    }

    @Test func aOneByteClosePayloadIsAProtocolError() {
        var driver = Driver()
        #expect(driver.frame(.connectionClose, ByteBuffer(bytes: [3])) == [.finishInbound, .armCloseTimer(.seconds(2)), .sendClose(.protocolError, reason: nil)])
    }

    @Test func theHandlersEndClosesAndTheClientsCloseEndsTheSession() {
        var driver = Driver()
        #expect(driver.handlerEnded() == [.finishInbound, .armCloseTimer(.seconds(2)), .sendClose(.normalClosure, reason: nil)])
        #expect(!driver.machine.mayWrite)
        // Data after our close is dropped (nobody reads it), the close ends the handshake.
        #expect(driver.text("late") == [])
        #expect(driver.frame(.connectionClose, Self.close(1000)) == [.closeChannel])
        #expect(driver.machine.state == .closed)
        #expect(driver.advance(.seconds(5)) == [])
    }

    @Test func aThrownCloseCodeIsSent() {
        var driver = Driver()
        #expect(driver.handlerEnded(.messageTooLarge) == [.finishInbound, .armCloseTimer(.seconds(2)), .sendClose(.messageTooLarge, reason: nil)])
    }

    @Test func aClientThatNeverAnswersOurCloseIsDroppedAtTheTimeout() {
        var driver = Driver()
        #expect(
            driver.record(driver.machine.closeRequested(.goingAway, reason: "bye", now: driver.clock.now)) == [
                .armCloseTimer(.seconds(2)), .sendClose(.goingAway, reason: "bye"),
            ])
        // The route still reads until the client answers.
        #expect(driver.text("still") == [.deliver(.init(opcode: .text, data: ByteBuffer(string: "still"), fin: true))])
        // A second close is nothing; a timer firing early is nothing.
        #expect(driver.record(driver.machine.closeRequested(.normalClosure, reason: nil, now: driver.clock.now)) == [])
        #expect(driver.machine.closeTimerFired(now: driver.clock.now.advanced(by: .seconds(1))) == [])
        #expect(driver.advance(.seconds(2)) == [.finishInbound, .closeChannel])
        #expect(driver.machine.state == .closed)
        #expect(driver.handlerEnded() == [])
    }

    @Test func aClientThatClosesButNeverGoesIsDroppedAtTheTimeout() {
        var driver = Driver()
        _ = driver.frame(.connectionClose, Self.close(1000))
        #expect(driver.advance(.seconds(2)) == [.closeChannel])
    }

    @Test func theClientsFINEndsInboundAndTheCloseEndsTheChannel() {
        var driver = Driver()
        #expect(driver.machine.inputClosed() == [.finishInbound])
        #expect(driver.machine.mayWrite)
        // No close can come back: ours goes out and the channel closes.
        #expect(driver.handlerEnded() == [.sendClose(.normalClosure, reason: nil), .closeChannel])
    }

    @Test func theClientsFINAfterOurCloseEndsTheChannel() {
        var driver = Driver()
        _ = driver.handlerEnded()
        #expect(driver.machine.inputClosed() == [.closeChannel])
    }

    @Test func protocolErrorsCloseWith1002() {
        var cases: [(String, (inout Driver) -> [Action])] = []
        cases.append(("reserved bits", { $0.frame(.text, rsv: true, ByteBuffer(string: "x")) }))
        cases.append(("reserved bits on a ping", { $0.frame(.ping, rsv: true) }))
        cases.append(("reserved opcode", { $0.frame(WebSocketOpcode(encodedWebSocketOpcode: 0x3)!) }))
        cases.append(("reserved control opcode", { $0.frame(WebSocketOpcode(encodedWebSocketOpcode: 0xB)!) }))
        cases.append(("fragmented ping", { $0.frame(.ping, fin: false) }))
        cases.append(("fragmented close", { $0.frame(.connectionClose, fin: false) }))
        cases.append(("ping over 125 bytes", { $0.frame(.ping, ByteBuffer(repeating: 0, count: 126)) }))
        cases.append(("continuation without a message", { $0.frame(.continuation, ByteBuffer(string: "x")) }))
        cases.append(
            (
                "new message inside a fragmented one",
                { d in
                    _ = d.text("a", fin: false); return d.frame(.binary)
                }
            ))
        for (name, events) in cases {
            var driver = Driver()
            #expect(events(&driver) == Self.protocolErrorClose, "\(name)")
            #expect(driver.machine.state != .open, "\(name)")
            // Further frames are not delivered; the client's close ends the session.
            #expect(driver.text("more") == [], "\(name)")
            #expect(driver.frame(.connectionClose, Self.close(1002)) == [.closeChannel], "\(name)")
        }
    }

    @Test func aProtocolErrorAfterOurCloseClosesTheChannel() {
        var driver = Driver()
        _ = driver.handlerEnded()
        #expect(driver.frame(.ping, fin: false) == [.closeChannel])
        #expect(driver.machine.state == .closed)
    }

    @Test func nothingHappensOnceClosed() {
        var driver = Driver()
        _ = driver.frame(.connectionClose)
        _ = driver.handlerEnded()
        #expect(driver.frame(.ping) == [])
        #expect(driver.text("x") == [])
        #expect(driver.machine.inputClosed() == [])
        #expect(driver.advance(.seconds(10)) == [])
    }

    @Test func aCloseReasonIsCutAtACharacterToFitTheFrame() {
        #expect(WebSocketSession.closeReason("short") == "short")
        let long = String(repeating: "é", count: 100)  // 200 bytes
        let cut = WebSocketSession.closeReason(long)
        #expect(cut.utf8.count == 122)
        #expect(cut == String(repeating: "é", count: 61))
    }
}

/// The route's side of the inbound: messages joined from fragments, their size bound, and
/// the buffer's back pressure.
@Suite struct WebSocketInboundTests {
    static func frame(_ opcode: WebSocketDataFrame.Opcode, _ text: String, fin: Bool = true) -> WebSocketDataFrame {
        WebSocketDataFrame(opcode: opcode, data: ByteBuffer(string: text), fin: fin)
    }

    @Test func fragmentsAreJoinedIntoMessages() async throws {
        let buffer = WebSocketInboundBuffer()
        for frame in [
            Self.frame(.text, "hel", fin: false), Self.frame(.continuation, "l", fin: false), Self.frame(.continuation, "o"),
            WebSocketDataFrame(opcode: .binary, data: ByteBuffer(bytes: [1, 2, 3]), fin: true),
        ] {
            await buffer.push(frame)
        }
        buffer.finish()
        var messages: [WebSocketMessage] = []
        for try await message in WebSocketInbound(buffer: buffer).messages(maxSize: 5) { messages.append(message) }
        #expect(messages == [.text("hello"), .binary(ByteBuffer(bytes: [1, 2, 3]))])
    }

    @Test(arguments: [["123456"], ["123", "456"]])
    func aMessageOverMaxSizeThrows1009(parts: [String]) async {
        let buffer = WebSocketInboundBuffer()
        for (index, part) in parts.enumerated() {
            await buffer.push(Self.frame(index == 0 ? .binary : .continuation, part, fin: index == parts.count - 1))
        }
        buffer.finish()
        var iterator = WebSocketInbound(buffer: buffer).messages(maxSize: 5).makeAsyncIterator()
        await #expect(throws: WebSocketCloseError(.messageTooLarge)) { _ = try await iterator.next() }
    }

    @Test func anUnfinishedMessageAtTheEndIsNoMessage() async throws {
        let buffer = WebSocketInboundBuffer()
        await buffer.push(Self.frame(.text, "par", fin: false))
        buffer.finish()
        var iterator = WebSocketInbound(buffer: buffer).messages(maxSize: 5).makeAsyncIterator()
        #expect(try await iterator.next() == nil)
    }

    @Test func aFullBufferHoldsThePushUntilTheRouteReads() async throws {
        let buffer = WebSocketInboundBuffer()
        for index in 0..<(WebSocketInboundBuffer.maxFrames - 1) { await buffer.push(Self.frame(.binary, "\(index)")) }
        #expect(buffer.held.frames == WebSocketInboundBuffer.maxFrames - 1)
        // The last frame that fits is held; its push waits for a read.
        let pusher = Task { await buffer.push(Self.frame(.binary, "last")) }
        #expect(await eventually { buffer.held.frames == WebSocketInboundBuffer.maxFrames })
        #expect(await buffer.next() == Self.frame(.binary, "0"))
        await pusher.value
        // Bytes count too: one large frame fills the buffer on its own.
        let large = WebSocketInboundBuffer()
        let big = Task { await large.push(WebSocketDataFrame(opcode: .binary, data: ByteBuffer(repeating: 0, count: WebSocketInboundBuffer.maxBytes), fin: true)) }
        #expect(await eventually { large.held.bytes == WebSocketInboundBuffer.maxBytes })
        large.finish()
        await big.value
        // Finished: what is held is still read, then the end; later pushes are dropped.
        #expect(await large.next()?.data.readableBytes == WebSocketInboundBuffer.maxBytes)
        await large.push(Self.frame(.text, "dropped"))
        #expect(await large.next() == nil)
    }

    @Test func aCancelledReaderEndsWithoutEndingTheBuffer() async {
        let buffer = WebSocketInboundBuffer()
        let reader = Task { await buffer.next() }
        reader.cancel()
        #expect(await reader.value == nil)
        await buffer.push(Self.frame(.text, "after"))
        #expect(await buffer.next() == Self.frame(.text, "after"))
    }
}

/// The session machine's rules over random event sequences (the fuzz target's check, a
/// fixed seed here; `make fuzz` explores further).
@Suite struct WebSocketSessionFuzzTests {
    @Test func randomEventSequencesKeepTheSessionsRules() {
        var random = SplitMix64(seed: 0x5EED_0036)
        for _ in 0..<2000 {
            let bytes = (0..<Int(random.next() % 200)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let broken = HTTPFuzzing.webSocketSession(bytes)
            #expect(broken == nil, "\(bytes)")
            if broken != nil { return }
        }
    }
}
