@testable import AgentHTTP
import AgentTestSupport
import HTTPTypes
import Testing

/// The connection core's rules as sequences of events with a manual clock: no socket, no
/// sleep. Each hardening case of the socket suites has its pure twin here.
@Suite struct HTTP1ConnectionStateMachineTests {
    typealias Machine = HTTP1ConnectionStateMachine<ManualClock>
    typealias Action = Machine.Action

    /// A machine, its clock, and the timers it asked for (the handler's part, in a table).
    struct Driver {
        var machine: Machine
        let clock = ManualClock()
        /// The wake-up each timer kind is scheduled for.
        var timers: [ConnectionTimer: ManualClock.Instant] = [:]
        var log: [Action] = []

        init(_ configuration: Machine.Configuration = .init(), admission: ConnectionAdmission = .admitted) {
            machine = Machine(configuration: configuration)
            record(machine.connectionOpened(admission, now: clock.now))
        }

        @discardableResult
        mutating func record(_ actions: Machine.Actions) -> [Action] {
            for action in actions {
                if case .armTimer(let kind, let delay) = action { timers[kind] = clock.now.advanced(by: delay) }
                log.append(action)
            }
            return Array(actions)
        }

        /// Moves the clock by `duration` and fires every timer then due, in deadline order.
        @discardableResult
        mutating func advance(_ duration: Duration) -> [Action] {
            clock.advance(by: duration)
            var out: [Action] = []
            // Bounded: each round fires one timer; a machine re-arming forever fails here.
            for _ in 0..<32 {
                guard let (kind, _) = timers.filter({ $0.value <= clock.now }).min(by: { $0.value < $1.value }) else { break }
                timers[kind] = nil
                out += record(machine.timerFired(kind, now: clock.now))
            }
            return out
        }

        @discardableResult
        mutating func bytes(_ text: String) -> [Action] {
            let utf8 = Array(text.utf8)
            var out = record(machine.bytesReceived(count: utf8.count, newline: utf8.firstIndex(of: 10), now: clock.now))
            out += record(machine.bytesProcessed(now: clock.now))
            return out
        }

        @discardableResult
        mutating func head(_ facts: RequestHeadFacts = .init(), route: RouteInfo = Self.collect) -> [Action] {
            record(machine.headReceived(facts, route: route, now: clock.now))
        }

        @discardableResult
        mutating func body(_ bytes: Int) -> [Action] { record(machine.bodyReceived(bytes: bytes, now: clock.now)) }

        @discardableResult
        mutating func end() -> [Action] { record(machine.endReceived(now: clock.now)) }

        @discardableResult
        mutating func respond(closes: Bool = false) -> [Action] {
            if closes { machine.responseHeadSaysClose() }
            return record(machine.responseEnded(now: clock.now))
        }

        /// A GET answered with the answer's bytes still waiting for the socket.
        static func answeredButUnsent(_ configuration: Machine.Configuration = .init(), closes: Bool = false) -> Driver {
            var driver = Driver(configuration)
            driver.get()
            driver.respond(closes: closes)
            driver.record(driver.machine.outputBlocked(now: driver.clock.now))
            return driver
        }

        /// A complete GET: head and end.
        @discardableResult
        mutating func get(_ facts: RequestHeadFacts = .init(), route: RouteInfo = Self.collect) -> [Action] {
            head(facts, route: route) + end()
        }

        static let collect = RouteInfo(body: .collect(limit: 1 << 20), executor: .eventLoop)
        static let stream = RouteInfo(body: .stream(idle: .seconds(60)), executor: .eventLoop)
        static let webSocketRoute = RouteInfo(
            body: .collect(limit: 1 << 20), executor: .eventLoop,
            webSocket: (AgentWebSocketRoute(path: "/ws", check: { _ in }, handler: { _, _, _ in }), [:]))
    }

    static let handshake = RequestHeadFacts(upgrade: .webSocket(versionOK: true, keyOK: true), uri: "/ws")

    static func refusal(in actions: [Action]) -> ConnectionRefusal? {
        for action in actions { if case .refuse(let refusal) = action { return refusal } }
        return nil
    }

    static func forwarded(in actions: [Action]) -> Machine.ForwardedHead? {
        for action in actions { if case .forwardHead(let head) = action { return head } }
        return nil
    }

    // MARK: Head deadline

    @Test func aPartialHeadPastItsDeadlineIsAnswered408() {
        var driver = Driver()
        driver.bytes("GET /hea")
        #expect(driver.advance(.seconds(9)).isEmpty)
        let actions = driver.advance(.seconds(1))
        #expect(Self.refusal(in: actions)?.status == .requestTimeout)
        #expect(Self.refusal(in: actions)?.body.detail == "No complete request head within 10 s.")
        #expect(actions.contains(.closeOutput))
        #expect(driver.machine.state == .closing)
        // The client may read the answer for the linger time, then the connection closes.
        #expect(driver.advance(.seconds(2)).contains(.close))
    }

    @Test func aConnectionThatSendsNothingClosesSilently() {
        var driver = Driver()
        let actions = driver.advance(.seconds(10))
        #expect(actions == [.close])
    }

    @Test func theHeadDeadlineRestartsAfterEachExchangeWithoutANewTimer() {
        var driver = Driver()
        driver.bytes("GET / HTTP/1.1\r\n\r\n")
        driver.get()
        driver.clock.advance(by: .seconds(5))
        let ended = driver.respond()
        // Moving the deadline is a clock read: the wake-up already scheduled (at 10 s)
        // comes first and re-arms itself then.
        #expect(!ended.contains { if case .armTimer = $0 { return true } else { return false } })
        #expect(ended.contains(.setPhase(.awaitingHead)))
        let early = driver.advance(.seconds(5))
        #expect(early == [.armTimer(.head, .seconds(5))])
        #expect(driver.advance(.seconds(5)) == [.close], "idle keep-alive closes at the head deadline")
    }

    @Test func noHeadDeadlineRunsWhileAResponseIsBeingWritten() {
        var driver = Driver()
        driver.bytes("GET /slow HTTP/1.1\r\n\r\n")
        driver.get()
        // A wait=true handler may run for minutes.
        #expect(driver.advance(.seconds(600)).isEmpty)
        driver.respond()
        #expect(driver.advance(.seconds(10)) == [.close])
    }

    // MARK: Body deadline

    @Test func aCollectedBodyHasATotalDeadline() {
        var driver = Driver()
        driver.head(.init(declaredLength: 100))
        for _ in 0..<59 {
            driver.clock.advance(by: .seconds(1))
            driver.body(1)
        }
        let actions = driver.advance(.seconds(1))
        #expect(Self.refusal(in: actions)?.status == .requestTimeout)
        #expect(Self.refusal(in: actions)?.body.detail == "The request body did not arrive within 60 s.")
    }

    @Test func aStreamedBodyHasAnIdleDeadline() {
        var driver = Driver()
        driver.head(.init(transferCoding: .chunked), route: Driver.stream)
        for _ in 0..<200 {
            // Only the lazy wake-up re-arms: a body that keeps moving may take as long as it needs.
            #expect(Self.refusal(in: driver.advance(.seconds(30))) == nil)
            driver.body(Machine.minimumBodyProgress)
        }
        let actions = driver.advance(.seconds(60))
        #expect(Self.refusal(in: actions)?.status == .requestTimeout)
    }

    /// A trickle does not move the idle deadline: a body must bring 1 KiB within each idle
    /// period, or a client sending a byte every 50 s would hold its connection (busy, never
    /// evicted), its handler and its file for ever.
    @Test func aTrickledStreamedBodyMeetsItsIdleDeadline() {
        var driver = Driver()
        driver.head(.init(transferCoding: .chunked), route: Driver.stream)
        #expect(Self.refusal(in: driver.advance(.seconds(50))) == nil)
        driver.body(1)
        var refused: ConnectionRefusal?
        // Bounded: two idle periods at most.
        for _ in 0..<12 where refused == nil {
            refused = Self.refusal(in: driver.advance(.seconds(5)))
            if refused == nil { driver.body(1) }
        }
        #expect(refused?.status == .requestTimeout, "a byte every 5 s after the first 50 s")
    }

    // MARK: Refusals at the head

    @Test func aDeclaredLengthOverTheRouteLimitIs413BeforeAnyBody() {
        var driver = Driver()
        let actions = driver.head(.init(declaredLength: 2 << 20))
        #expect(Self.refusal(in: actions)?.status == .contentTooLarge)
        #expect(driver.machine.state == .closing)
        #expect(driver.body(100).isEmpty, "the body is dropped")
        // A streaming route has no cap.
        var streaming = Driver()
        #expect(Self.forwarded(in: streaming.head(.init(declaredLength: 2 << 20), route: Driver.stream))?.body == .stream)
    }

    @Test func connectIs405WithAllow() {
        var driver = Driver()
        let refusal = Self.refusal(in: driver.head(.init(isConnect: true)))
        #expect(refusal?.status == .methodNotAllowed)
        #expect(refusal?.headers == [.init(name: "Allow", value: "GET, POST")])
    }

    @Test func anUnknownTransferCodingIs501() {
        var driver = Driver()
        let refusal = Self.refusal(in: driver.head(.init(transferCoding: .other("gzip, chunked"))))
        #expect(refusal?.status == .notImplemented)
        #expect(refusal?.body.detail == "Only Transfer-Encoding: chunked is accepted; got \"gzip, chunked\".")
    }

    @Test func anExpectationOtherThan100ContinueIs417() {
        var driver = Driver()
        #expect(Self.refusal(in: driver.head(.init(expectation: .other)))?.status == .expectationFailed)
        // 417 comes before 413, as the expectation is read first.
        var both = Driver()
        #expect(Self.refusal(in: both.head(.init(declaredLength: 2 << 20, expectation: .other)))?.status == .expectationFailed)
    }

    /// A refused HEAD is answered without the body; any other method with it.
    @Test func aRefusedHeadOmitsTheBody() {
        var head = RequestHeadFacts(expectation: .other)
        head.isHead = true
        var driver = Driver()
        let refusal = Self.refusal(in: driver.head(head))
        #expect(refusal?.status == .expectationFailed && refusal?.omitsBody == true)
        var get = Driver()
        #expect(Self.refusal(in: get.head(.init(expectation: .other)))?.omitsBody == false)
    }

    @Test func continueIsSentWhenTheRequestIsTakenUp() {
        var driver = Driver()
        let actions = driver.head(.init(declaredLength: 10, expectation: .continue100))
        #expect(actions.contains(.send100Continue))
        #expect(Self.forwarded(in: actions)?.rewrite == [.removeExpect])
        // Over the limit: 413, no 100.
        var refused = Driver()
        let over = refused.head(.init(declaredLength: 2 << 20, expectation: .continue100))
        #expect(!over.contains(.send100Continue))
        #expect(Self.refusal(in: over)?.status == .contentTooLarge)
    }

    @Test func aPipelinedContinueWaitsForTheResponseBeforeIt() {
        var driver = Driver()
        driver.get()
        let second = driver.head(.init(declaredLength: 10, expectation: .continue100))
        #expect(!second.contains(.send100Continue), "never ahead of an earlier response")
        #expect(Self.forwarded(in: second)?.queued == true)
        #expect(driver.machine.readsPaused)
        let ended = driver.respond()
        #expect(ended.contains(.send100Continue))
        #expect(ended.contains(.resumeReads))
        #expect(!driver.machine.readsPaused)
    }

    @Test func aPipelinedRefusedContinueGetsNo100() {
        var driver = Driver()
        driver.get()
        let second = driver.head(.init(declaredLength: 2 << 20, expectation: .continue100))
        #expect(second.isEmpty || !second.contains(.send100Continue))
        let ended = driver.respond()
        #expect(!ended.contains(.send100Continue))
        #expect(Self.refusal(in: ended)?.status == .contentTooLarge)
    }

    // MARK: Parse errors

    @Test func anOverlongRequestLineIs414AndOverlongFieldsAre431() {
        var line = Driver()
        line.bytes("GET /" + String(repeating: "a", count: 17 * 1024))
        #expect(Self.refusal(in: line.record(line.machine.parseError(.headerOverflow, now: line.clock.now)))?.status == .uriTooLong)

        var fields = Driver()
        fields.bytes("GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: 17 * 1024))
        #expect(
            Self.refusal(in: fields.record(fields.machine.parseError(.headerOverflow, now: fields.clock.now)))?.status
                == .requestHeaderFieldsTooLarge)

        var malformed = Driver()
        malformed.bytes("GARBAGE\r\n\r\n")
        let refusal = Self.refusal(in: malformed.record(malformed.machine.parseError(.other("invalid method"), now: malformed.clock.now)))
        #expect(refusal?.status == .badRequest)
        #expect(refusal?.body.detail == "invalid method")
    }

    /// The decoder scans a read for its newline only while the machine measures a line.
    @Test func theRequestLineIsMeasuredOnlyUntilItsNewline() {
        var driver = Driver()
        #expect(driver.machine.measuresRequestLine)
        driver.bytes("GET / HT")
        #expect(driver.machine.measuresRequestLine)
        driver.bytes("TP/1.1\r\nHost: x\r\n")
        #expect(!driver.machine.measuresRequestLine, "measured")
        driver.head()
        #expect(!driver.machine.measuresRequestLine, "a request under way")
        driver.end()
        #expect(driver.machine.measuresRequestLine, "the line of a request pipelined behind it")
        driver.respond()
        #expect(driver.machine.measuresRequestLine)
    }

    @Test func aRequestLineStartingInsideAnEarlierReadIsNotMeasured() {
        var driver = Driver()
        // One read carries a whole request and the start of the next one.
        let text = "GET / HTTP/1.1\r\n\r\nGET /" + String(repeating: "a", count: 100)
        _ = driver.record(driver.machine.bytesReceived(count: text.utf8.count, newline: 14, now: driver.clock.now))
        driver.get()
        driver.record(driver.machine.bytesProcessed(now: driver.clock.now))
        driver.respond()
        #expect(!driver.machine.measuresRequestLine)
        driver.bytes(String(repeating: "a", count: 17 * 1024))
        let actions = driver.record(driver.machine.parseError(.headerOverflow, now: driver.clock.now))
        #expect(Self.refusal(in: actions)?.status == .requestHeaderFieldsTooLarge)
    }

    @Test func aParseErrorInsideTheBodyFailsItsReader() {
        var driver = Driver()
        driver.head(.init(transferCoding: .chunked), route: Driver.stream)
        let actions = driver.record(driver.machine.parseError(.other("invalid chunk size"), now: driver.clock.now))
        #expect(actions.first == .failBody(.malformed("invalid chunk size")))
        #expect(Self.refusal(in: actions) == nil, "the route answers 400 itself")
        // Its response is written, then the connection closes gracefully.
        let ended = driver.respond()
        #expect(ended.contains(.closeOutput))
    }

    @Test func theChunkFramingBudgetFailsTheBody() {
        var driver = Driver()
        driver.head(.init(transferCoding: .chunked), route: Driver.stream)
        // 20 KB of chunk extensions carrying 10 bytes of data.
        driver.record(driver.machine.bytesReceived(count: 20 * 1024, newline: nil, now: driver.clock.now))
        driver.body(10)
        let actions = driver.record(driver.machine.bytesProcessed(now: driver.clock.now))
        guard case .failBody(.malformed(let detail)) = actions.first else {
            Issue.record("expected the body to fail, got \(actions)")
            return
        }
        #expect(detail.contains("chunk framing"))
        // A stream of tiny chunks is not refused.
        var tiny = Driver()
        tiny.head(.init(transferCoding: .chunked), route: Driver.stream)
        for _ in 0..<10_000 {
            tiny.record(tiny.machine.bytesReceived(count: 6, newline: nil, now: tiny.clock.now))
            tiny.body(1)
            #expect(tiny.record(tiny.machine.bytesProcessed(now: tiny.clock.now)).isEmpty)
        }
    }

    // MARK: Pipelining

    @Test func aPipelinedRefusalWaitsForTheResponsesBeforeIt() {
        var driver = Driver()
        driver.get()
        driver.get()
        let refused = driver.record(driver.machine.parseError(.other("bad"), now: driver.clock.now))
        #expect(refused.isEmpty, "nothing is written ahead of the two responses")
        #expect(Self.refusal(in: driver.respond()) == nil)
        let last = driver.respond()
        #expect(Self.refusal(in: last)?.status == .badRequest)
        #expect(last.contains(.closeOutput))
    }

    @Test func aClosingResponseDropsTheWaitingRefusal() {
        var driver = Driver()
        driver.get(.init(keepAlive: false))
        driver.head(.init(isConnect: true))
        let ended = driver.respond(closes: true)
        #expect(Self.refusal(in: ended) == nil, "after Connection: close nothing may follow")
        #expect(ended.contains(.closeOutput))
    }

    /// Requests pipelined ahead of a `Connection: close` one are all answered: only the
    /// closing request's response is the last.
    @Test func aClosingRequestBehindPipelinedOnesEndsTheConnectionAfterItsOwnResponse() {
        var driver = Driver()
        driver.get()
        driver.get()
        driver.get(.init(keepAlive: false))
        #expect(!driver.machine.responseMustClose)
        #expect(!driver.respond().contains(.closeOutput), "the first of three responses keeps the connection")
        #expect(!driver.machine.responseMustClose)
        #expect(!driver.respond().contains(.closeOutput), "so does the second")
        #expect(driver.machine.responseMustClose, "the closing request's response says Connection: close")
        #expect(driver.respond(closes: true).contains(.closeOutput))
    }

    /// One bound on what waits its turn: every part (head, body, end) decoded behind the
    /// request being answered counts.
    @Test func pipelinedPartsBeyondTheBoundCloseTheConnection() {
        var driver = Driver()
        driver.get()
        for _ in 0..<(ReadGate.maxQueuedParts / 2) { driver.get() }
        #expect(driver.head() == [.close])

        var bodies = Driver()
        bodies.get()
        bodies.head(.init(transferCoding: .chunked), route: Driver.stream)
        for _ in 1..<ReadGate.maxQueuedParts { #expect(bodies.body(1) == [.forward]) }
        #expect(bodies.body(1) == [.close], "a waiting request's body parts count too")

        // Once nothing waits, reads resume and the count starts again.
        var drained = Driver()
        drained.get()
        for _ in 0..<(ReadGate.maxQueuedParts / 2 - 1) { drained.get() }
        for _ in 0..<(ReadGate.maxQueuedParts / 2) { drained.respond() }
        #expect(!drained.machine.readsPaused)
        drained.get()
        #expect(drained.get().contains(.forward))
    }

    // MARK: WebSockets

    @Test func aHandshakeIsAdmittedThenTheConnectionIsAWebSocket() {
        var driver = Driver()
        #expect(driver.head(Self.handshake, route: Driver.webSocketRoute) == [.setPhase(.busy), .admitWebSocket])
        let admitted = driver.record(driver.machine.webSocketAdmission(.admitted(prepare: false), route: Driver.webSocketRoute, now: driver.clock.now))
        #expect(Self.forwarded(in: admitted)?.handshake == true)
        let ended = driver.end()
        #expect(ended.contains(.switchToWebSocket))
        #expect(driver.machine.isWebSocket)
    }

    @Test func aHandshakeAfterTheFirstRequestIs307() {
        var driver = Driver()
        driver.get()
        driver.respond()
        let refusal = Self.refusal(in: driver.head(Self.handshake, route: Driver.webSocketRoute))
        #expect(refusal?.status == .temporaryRedirect)
        #expect(refusal?.headers == [.init(name: "Location", value: "/ws")])
    }

    @Test func aHandshakeBeyondTheWebSocketBudgetIs503() {
        var driver = Driver()
        driver.head(Self.handshake, route: Driver.webSocketRoute)
        let refusal = Self.refusal(in: driver.record(driver.machine.webSocketAdmission(.noSlot, route: Driver.webSocketRoute, now: driver.clock.now)))
        #expect(refusal?.status == .serviceUnavailable)
        #expect(refusal?.headers == [.init(name: "Retry-After", value: "1")])
    }

    @Test func malformedHandshakesAndRefusedOnesGoToTheTwin() {
        var version = Driver()
        let badVersion = Self.forwarded(in: version.head(.init(upgrade: .webSocket(versionOK: false, keyOK: true)), route: Driver.webSocketRoute))
        #expect(badVersion?.handshakeRefusal == .badVersion)
        #expect(badVersion?.rewrite == [.stripUpgrade])
        var key = Driver()
        #expect(Self.forwarded(in: key.head(.init(upgrade: .webSocket(versionOK: true, keyOK: false)), route: Driver.webSocketRoute))?.handshakeRefusal == .badKey)
        var check = Driver()
        check.head(Self.handshake, route: Driver.webSocketRoute)
        let twin = check.record(check.machine.webSocketAdmission(.checkFailed, route: Driver.webSocketRoute, now: check.clock.now))
        #expect(Self.forwarded(in: twin)?.handshakeRefusal == .route)
        // A prepare that fails gives the slot back.
        var prepare = Driver()
        prepare.head(Self.handshake, route: Driver.webSocketRoute)
        #expect(prepare.record(prepare.machine.webSocketAdmission(.admitted(prepare: true), route: Driver.webSocketRoute, now: prepare.clock.now)) == [.prepareWebSocket])
        #expect(prepare.end() == [.hold], "held while the route prepares")
        let failed = prepare.record(prepare.machine.webSocketPrepared(false, route: Driver.webSocketRoute, now: prepare.clock.now))
        #expect(failed.first == .releaseWebSocketSlot)
        #expect(Self.forwarded(in: failed)?.handshake == false)
        // An upgrade to anything else is ignored.
        var other = Driver()
        #expect(Self.forwarded(in: other.head(.init(upgrade: .other)))?.rewrite == [.stripUpgrade])
        #expect(!other.machine.responseMustClose, "an Upgrade without Connection: upgrade leaves the decoder reading")
        // With `Connection: upgrade` the decoder reads nothing more: the answer closes.
        var stops = Driver()
        #expect(Self.forwarded(in: stops.head(.init(upgrade: .other, decoderStops: true)))?.keepAlive == false)
        #expect(stops.machine.responseMustClose)
        var declined = Driver()
        declined.head(.init(upgrade: .webSocket(versionOK: true, keyOK: true), decoderStops: true))
        #expect(declined.machine.responseMustClose, "a handshake to a plain route closes after its answer")
    }

    @Test func anUnmaskedFrameCloses1002() {
        var driver = upgraded()
        #expect(driver.record(driver.machine.webSocketFrameReceived(masked: true, now: driver.clock.now)).isEmpty)
        #expect(driver.record(driver.machine.webSocketFrameReceived(masked: false, now: driver.clock.now)) == [.sendClose(code: 1002), .closeAfterWrites, .armTimer(.linger, .seconds(2))])
        #expect(driver.record(driver.machine.webSocketFrameReceived(masked: false, now: driver.clock.now)).isEmpty, "one close")
    }

    /// What waits unparsed (in the decoder stopped behind a handshake, or in the handler
    /// while the connection switches) is bounded.
    @Test func bytesHeldDuringAnUpgradeAreBounded() {
        var driver = upgraded()
        #expect(driver.record(driver.machine.bytesHeld(Machine.maxHeldBytes)).isEmpty)
        #expect(driver.record(driver.machine.bytesHeld(Machine.maxHeldBytes + 1)) == [.close])
        #expect(driver.record(driver.machine.bytesHeld(Machine.maxHeldBytes + 2)).isEmpty, "closed once")
    }

    @Test func aSilentPeerIsPingedThenClosed1001() {
        var driver = upgraded()
        #expect(driver.advance(.seconds(30)) == [.ping, .armTimer(.webSocketPing, .seconds(30))])
        let closed = driver.advance(.seconds(30))
        #expect(closed.prefix(3) == [.countClose("websocket_idle"), .sendClose(code: 1001), .closeAfterWrites])
        #expect(driver.advance(.seconds(2)) == [.close], "a peer that does not read either")
    }

    @Test func aPeerThatTalksIsNeverPinged() {
        var driver = upgraded()
        for _ in 0..<10 {
            driver.record(driver.machine.webSocketFrameReceived(masked: true, now: driver.clock.now))
            #expect(!driver.advance(.seconds(30)).contains(.ping))
        }
    }

    func upgraded() -> Driver {
        var driver = Driver()
        driver.head(Self.handshake, route: Driver.webSocketRoute)
        driver.record(driver.machine.webSocketAdmission(.admitted(prepare: false), route: Driver.webSocketRoute, now: driver.clock.now))
        driver.end()
        driver.record(driver.machine.webSocketAnswered(now: driver.clock.now))
        return driver
    }

    // MARK: Shutdown, FIN, linger, admission

    @Test func quiesceInEachState() {
        var idle = Driver()
        #expect(idle.record(idle.machine.quiesce(now: idle.clock.now)) == [.close])

        var partial = Driver()
        partial.bytes("GET /")
        #expect(partial.record(partial.machine.quiesce(now: partial.clock.now)) == [.close])

        var busy = Driver()
        busy.get()
        #expect(busy.record(busy.machine.quiesce(now: busy.clock.now)).isEmpty)
        #expect(busy.machine.responseMustClose, "its response says Connection: close")
        #expect(busy.respond(closes: true).contains(.closeOutput))

        var reading = Driver()
        reading.head(.init(declaredLength: 10))
        #expect(reading.record(reading.machine.quiesce(now: reading.clock.now)).isEmpty)
        #expect(reading.machine.responseMustClose)

        var webSocket = upgraded()
        #expect(webSocket.record(webSocket.machine.quiesce(now: webSocket.clock.now)).isEmpty, "the WebSocket session ends itself")

        var refusing = Driver()
        refusing.get()
        refusing.head(.init(isConnect: true))
        #expect(refusing.record(refusing.machine.quiesce(now: refusing.clock.now)).isEmpty)
        #expect(Self.refusal(in: refusing.respond(closes: true)) == nil)
    }

    @Test func inputClosedMidRequest() {
        var streamed = Driver()
        streamed.head(.init(transferCoding: .chunked), route: Driver.stream)
        let actions = streamed.record(streamed.machine.inputEnded(now: streamed.clock.now))
        #expect(actions == [.failBody(.incomplete)], "the handler answers, then the connection closes")
        #expect(streamed.respond().contains(.closeOutput))

        // A collected body never complete: its handler never runs, so the core answers 400
        // (before, the connection closed with no answer).
        var collected = Driver()
        collected.head(.init(declaredLength: 100))
        let ended = collected.record(collected.machine.inputEnded(now: collected.clock.now))
        #expect(ended.first == .failBody(.incomplete))
        #expect(Self.refusal(in: ended) == .bodyIncomplete, "\(ended)")
        // Behind a response under way: written after it.
        var behind = Driver()
        behind.get()
        behind.head(.init(declaredLength: 100))
        let waiting = behind.record(behind.machine.inputEnded(now: behind.clock.now))
        #expect(Self.refusal(in: waiting) == nil, "\(waiting)")
        #expect(Self.refusal(in: behind.respond()) == .bodyIncomplete)

        // Between requests: closed at once; behind pipelined ones: they are served first.
        var between = Driver()
        #expect(between.record(between.machine.inputEnded(now: between.clock.now)) == [.close])
        var pipelined = Driver()
        pipelined.get()
        pipelined.get()
        #expect(pipelined.record(pipelined.machine.inputEnded(now: pipelined.clock.now)).isEmpty)
        #expect(!pipelined.machine.responseMustClose)
        #expect(!pipelined.respond().contains(.closeOutput))
        #expect(pipelined.machine.responseMustClose, "the last one says Connection: close")
        #expect(pipelined.respond().contains(.closeOutput))
    }

    @Test func aRefusalLingersThenCloses() {
        var driver = Driver()
        driver.head(.init(isConnect: true))
        #expect(driver.bytes("more input").isEmpty, "input is dropped while lingering")
        #expect(driver.advance(.seconds(1)).isEmpty)
        #expect(driver.advance(.seconds(1)) == [.close])
        // The client's FIN ends it sooner.
        var fin = Driver()
        fin.head(.init(isConnect: true))
        #expect(fin.record(fin.machine.inputEnded(now: fin.clock.now)) == [.close])
    }

    @Test func aConnectionAdmittedWhileDrainingIsAnswered503() {
        var driver = Driver(admission: .draining)
        let actions = driver.bytes("GET / HTTP/1.1\r\n\r\n")
        #expect(Self.refusal(in: actions)?.status == .serviceUnavailable)
        #expect(Self.refusal(in: actions)?.body.message == "The agent is shutting down.")
        var silent = Driver(admission: .draining)
        #expect(silent.advance(.seconds(10)) == [.close])
        let refused = Driver(admission: .refused)
        #expect(refused.log == [.close])
    }

    @Test func aStalledWriteCloses() {
        var driver = Driver()
        driver.get()
        driver.record(driver.machine.writeBlocked(now: driver.clock.now))
        driver.clock.advance(by: .seconds(10))
        driver.record(driver.machine.writeUnblocked(now: driver.clock.now))
        driver.record(driver.machine.writeBlocked(now: driver.clock.now))
        #expect(driver.advance(.seconds(20)) == [.armTimer(.writeStall, .seconds(10))])
        #expect(driver.advance(.seconds(10)) == [.countClose("write_stall"), .close])
    }

    /// Time the loop could not look (a wake-up that ran late) moves the deadline by as much;
    /// with no deadline set, nothing is armed.
    @Test func aLateLookPostponesTheStallDeadline() {
        var configuration = Machine.Configuration()
        configuration.writeStallTimeout = .seconds(5)
        var driver = Driver(configuration)
        driver.get()
        #expect(driver.record(driver.machine.writeBlocked(now: driver.clock.now)) == [.armTimer(.writeStall, .seconds(5))])
        #expect(driver.advance(.seconds(4)).isEmpty)
        driver.machine.postponeWriteStall(by: .seconds(3))
        #expect(driver.advance(.seconds(1)) == [.armTimer(.writeStall, .seconds(3))], "not yet due")
        #expect(driver.advance(.seconds(3)) == [.countClose("write_stall"), .close])
        var unblocked = Driver(configuration)
        unblocked.get()
        unblocked.record(unblocked.machine.writeBlocked(now: unblocked.clock.now))
        unblocked.record(unblocked.machine.writeUnblocked(now: unblocked.clock.now))
        unblocked.machine.postponeWriteStall(by: .seconds(3))
        #expect(unblocked.advance(.seconds(9)).isEmpty, "a cleared deadline stays cleared")
    }

    /// Answers made at once (a HEAD, `/healthz`) wait for no write of their own: a response
    /// that ends with its bytes unsent stops reads until the socket takes them, and a client
    /// that never reads is closed at the write-stall time. Reads resume once it does.
    @Test func anAnswerLeftUnsentStopsReadsUntilTheSocketTakesIt() {
        // A write-stall time shorter than the next head's 10 s, so that it is what closes.
        var configuration = Machine.Configuration()
        configuration.writeStallTimeout = .seconds(5)
        var driver = Driver(configuration)
        driver.get()
        driver.respond()
        #expect(!driver.machine.readsPaused)
        #expect(driver.record(driver.machine.outputBlocked(now: driver.clock.now)) == [.setPhase(.busy), .armTimer(.writeStall, .seconds(5))])
        #expect(driver.machine.readsPaused, "no more requests are read while the answer waits")
        #expect(driver.record(driver.machine.writeUnblocked(now: driver.clock.now)) == [.resumeReads, .setPhase(.awaitingHead)])
        #expect(!driver.machine.readsPaused)
        #expect(driver.advance(.seconds(5)).isEmpty, "the stall timer was cleared")
        // Never taken: closed at the write-stall time.
        var stalled = Driver.answeredButUnsent(configuration)
        #expect(stalled.advance(.seconds(4)).isEmpty)
        #expect(stalled.advance(.seconds(1)) == [.countClose("write_stall"), .close])
    }

    /// An answer made at once and still draining to a slow client that reads is not cut by
    /// the next request's deadline: it starts once the socket took the answer (before, the
    /// idle connection closed 10 s after the answer was handed over, its rest unsent).
    @Test func theNextRequestsDeadlineWaitsForTheAnswerToGoOut() {
        var driver = Driver.answeredButUnsent()
        #expect(driver.advance(.seconds(9)).isEmpty)
        // The socket took some (the handler's look moves the stall deadline).
        driver.record(driver.machine.writeBlocked(now: driver.clock.now))
        #expect(!driver.advance(.seconds(15)).contains(.close), "draining past the 10 s head time")
        driver.record(driver.machine.writeUnblocked(now: driver.clock.now))
        #expect(!driver.advance(.milliseconds(9900)).contains(.close))
        #expect(driver.advance(.milliseconds(100)).contains(.close), "10 s after the socket took it")
        // A write blocked before the answer ended defers the deadline as well.
        var early = Driver()
        early.get()
        early.record(early.machine.writeBlocked(now: early.clock.now))
        early.respond()
        #expect(!early.advance(.seconds(20)).contains(.close))
        early.record(early.machine.writeUnblocked(now: early.clock.now))
        #expect(early.advance(.seconds(10)).contains(.close))
    }

    /// While the answer waits the connection counts as busy, not as waiting for a request
    /// (the registry evicts those first); a shutdown or the client's half-close lets the
    /// answer go out before the close; and a look at the socket scheduled before it became
    /// writable again changes nothing (it had set a write-stall deadline on a writable socket,
    /// which then put off the next idle deadline and closed a healthy connection 30 s later).
    @Test func anAnswerStillGoingOutIsBusyAndFinishedBeforeTheClose() {
        var driver = Driver()
        driver.get()
        #expect(driver.respond().contains(.setPhase(.awaitingHead)))
        #expect(driver.record(driver.machine.outputBlocked(now: driver.clock.now)).contains(.setPhase(.busy)))
        #expect(driver.record(driver.machine.writeUnblocked(now: driver.clock.now)).contains(.setPhase(.awaitingHead)))
        #expect(driver.record(driver.machine.writeProgressed(now: driver.clock.now)).isEmpty, "a stale look")
        driver.get()
        #expect(driver.respond().contains(.setPhase(.awaitingHead)), "no output waits: idle at once")
        #expect(driver.advance(.seconds(10)).contains(.close))

        var quiescing = Driver.answeredButUnsent()
        let quiesced = quiescing.record(quiescing.machine.quiesce(now: quiescing.clock.now))
        #expect(quiesced.contains(.closeOutput) && !quiesced.contains(.close), "\(quiesced)")

        var halfClosed = Driver.answeredButUnsent()
        let ended = halfClosed.record(halfClosed.machine.inputEnded(now: halfClosed.clock.now))
        #expect(ended.contains(.closeOutput) && !ended.contains(.close), "\(ended)")
        #expect(halfClosed.advance(.seconds(30)) == [.countClose("write_stall"), .close], "still bounded")
    }

    /// The same for `Connection: close`: the linger (time for the client's FIN) starts once
    /// the last answer went out (before, it closed 2 s after the answer was handed over).
    /// A WebSocket's close frame keeps its linger: it bounds the close handshake.
    @Test func theLingerWaitsForTheLastAnswerToGoOut() {
        var driver = Driver()
        driver.get()
        #expect(driver.respond(closes: true).contains(.closeOutput))
        driver.record(driver.machine.outputBlocked(now: driver.clock.now))
        #expect(!driver.advance(.seconds(5)).contains(.close), "past the 2 s linger, still draining")
        driver.record(driver.machine.writeUnblocked(now: driver.clock.now))
        #expect(!driver.advance(.milliseconds(1900)).contains(.close))
        #expect(driver.advance(.milliseconds(100)).contains(.close))
        // Never taken: the write-stall time closes it.
        var stalled = Driver.answeredButUnsent(closes: true)
        #expect(stalled.advance(.seconds(30)) == [.countClose("write_stall"), .close])
    }

    /// Reads paused for a waiting answer stay paused while a pipelined request or a body's
    /// reader holds them too, and resume only when nothing does.
    @Test func writeAndBodyPausesResumeReadsTogether() {
        var driver = Driver()
        driver.head(.init(transferCoding: .chunked), route: Driver.stream)
        driver.record(driver.machine.bodyBackPressure(stop: true))
        driver.record(driver.machine.outputBlocked(now: driver.clock.now))
        #expect(driver.record(driver.machine.bodyBackPressure(stop: false)).isEmpty, "the output still holds reads")
        #expect(driver.machine.readsPaused)
        #expect(driver.record(driver.machine.writeUnblocked(now: driver.clock.now)) == [.resumeReads])
    }

    @Test func bodyBackPressurePausesAndResumesReads() {
        var driver = Driver()
        driver.head(.init(transferCoding: .chunked), route: Driver.stream)
        #expect(driver.record(driver.machine.bodyBackPressure(stop: true)).isEmpty)
        #expect(driver.machine.readsPaused)
        #expect(driver.record(driver.machine.bodyBackPressure(stop: true)).isEmpty)
        #expect(driver.record(driver.machine.bodyBackPressure(stop: false)) == [.resumeReads])
        #expect(!driver.machine.readsPaused)
        // Paused when its last answer is written: reads go on (input is read and dropped).
        driver.record(driver.machine.bodyBackPressure(stop: true))
        let closing = driver.respond(closes: true)
        #expect(closing.contains(.resumeReads) && closing.contains(.closeOutput))
        #expect(!driver.machine.readsPaused)
    }

    // MARK: Rules the machine owns

    /// An event the rules cannot follow closes the connection instead of trapping.
    @Test func aBrokenInvariantClosesTheConnection() {
        var unanswered = Driver()
        #expect(unanswered.record(unanswered.machine.responseEnded(now: unanswered.clock.now)) == [.countClose("invariant"), .close])
        #expect(unanswered.machine.state == .closed)

        var headless = Driver()
        #expect(headless.body(3) == [.countClose("invariant"), .close])
        var endless = Driver()
        endless.get()
        endless.respond()
        #expect(endless.end() == [.countClose("invariant"), .close])

        var twice = Driver()
        twice.get()
        twice.respond()
        #expect(twice.respond() == [.countClose("invariant"), .close])
    }

    /// However many actions an event yields, none is lost: past the inline ones they spill.
    @Test func actionsCannotOverflow() {
        var actions = HTTP1ConnectionActions()
        for code in 0..<20 { actions.append(.sendClose(code: UInt16(code))) }
        #expect(actions.count == 20)
        #expect(Array(actions) == (0..<20).map { .sendClose(code: UInt16($0)) })
        #expect(actions == HTTP1ConnectionActions((0..<20).map { .sendClose(code: UInt16($0)) }))
        #expect(actions != HTTP1ConnectionActions((0..<19).map { .sendClose(code: UInt16($0)) }))
    }

    /// The handshake's own parts are not served: its end makes the connection a WebSocket.
    @Test func aHandshakesPartsAreNotForwarded() {
        var driver = Driver()
        driver.head(Self.handshake, route: Driver.webSocketRoute)
        driver.record(driver.machine.webSocketAdmission(.admitted(prepare: false), route: Driver.webSocketRoute, now: driver.clock.now))
        #expect(driver.body(4).allSatisfy { $0 != .forward })
        let ended = driver.end()
        #expect(!ended.contains(.forward) && ended.contains(.switchToWebSocket))
    }

    /// The slot of the WebSocket budget is the machine's to give back, once.
    @Test func theWebSocketSlotIsGivenBackOnce() {
        var upgradedOne = upgraded()
        #expect(upgradedOne.record(upgradedOne.machine.connectionClosed()) == [.releaseWebSocketSlot])
        #expect(upgradedOne.record(upgradedOne.machine.connectionClosed()).isEmpty)

        var refused = Driver()
        refused.head(Self.handshake, route: Driver.webSocketRoute)
        refused.record(refused.machine.webSocketAdmission(.checkFailed, route: Driver.webSocketRoute, now: refused.clock.now))
        #expect(refused.record(refused.machine.connectionClosed()).isEmpty, "no slot was taken")

        var declined = Driver()
        declined.head(Self.handshake, route: Driver.webSocketRoute)
        declined.record(declined.machine.webSocketAdmission(.admitted(prepare: true), route: Driver.webSocketRoute, now: declined.clock.now))
        #expect(declined.record(declined.machine.webSocketPrepared(false, route: Driver.webSocketRoute, now: declined.clock.now)).contains(.releaseWebSocketSlot))
        #expect(declined.record(declined.machine.connectionClosed()).isEmpty, "already given back")

        var late = Driver()
        late.get()
        late.respond()
        #expect(late.record(late.machine.webSocketAdmission(.admitted(prepare: false), route: Driver.webSocketRoute, now: late.clock.now)) == [.releaseWebSocketSlot])
    }

    /// A head the handler cannot read as a request: its 400 is the connection's last answer.
    @Test func anUnreadableRequestIsTheLastAnswer() {
        var driver = Driver()
        driver.head()
        #expect(!driver.machine.responseMustClose)
        driver.machine.requestUnreadable()
        #expect(driver.machine.responseMustClose)
        driver.end()
        #expect(driver.respond(closes: true).contains(.closeOutput))
    }

    /// NIO's upgrader refusing the handshake after all: a 400 and a graceful close, once.
    @Test func aFailedUpgradeIsRefused() {
        var driver = Driver()
        driver.head(Self.handshake, route: Driver.webSocketRoute)
        driver.record(driver.machine.webSocketAdmission(.admitted(prepare: false), route: Driver.webSocketRoute, now: driver.clock.now))
        driver.end()
        let failed = driver.record(driver.machine.upgradeFailed(now: driver.clock.now))
        #expect(Self.refusal(in: failed)?.status == .badRequest)
        #expect(failed.contains(.closeOutput))
        #expect(driver.record(driver.machine.upgradeFailed(now: driver.clock.now)).isEmpty)
    }
}
