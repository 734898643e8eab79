import HTTPTypes

/// Timers, shutdown, the client's FIN, and the transitions every event shares.
extension HTTP1ConnectionStateMachine {
    // MARK: Timers, shutdown, FIN

    /// The wake-up of `timer` came.
    mutating func timerFired(_ timer: ConnectionTimer, now: C.Instant) -> Actions {
        var actions = Actions()
        guard due(timer, now: now, &actions) else { return actions }
        switch timer {
        case .head:
            switch state {
            case .awaitingHead(let waiting) where waiting.outstanding == 0:
                if waiting.line.bytes > 0 {
                    refuseNow(
                        ConnectionRefusal(
                            status: .requestTimeout,
                            body: APIErrorBody(message: "Request timeout.", detail: "No complete request head within \(Self.seconds(configuration.headTimeout)) s.")),
                        now: now, &actions)
                } else {
                    closeNow(&actions)
                }
            case .drainingRefusal:
                closeNow(&actions)
            default:
                break
            }
        case .body:
            if case .request = state {
                refuseNow(
                    ConnectionRefusal(
                        status: .requestTimeout,
                        body: APIErrorBody(message: "Request timeout.", detail: "The request body did not arrive within \(Self.seconds(configuration.bodyTimeout)) s.")),
                    now: now, &actions)
            }
        case .linger:
            if case .closing = state { closeNow(&actions) }
        case .webSocketPing:
            guard case .webSocket(var watch) = state else { break }
            if watch.heard {
                watch.heard = false
                watch.pinged = false
            } else if !watch.pinged {
                watch.pinged = true
                actions.append(.ping)
            } else {
                // Silent since the ping: close frame 1001 (going away), no close handshake
                // awaited; a peer that does not read either is closed at the linger deadline.
                state = .closing
                actions.append(.countClose("websocket_idle"))
                actions.append(.sendClose(code: 1001))
                actions.append(.closeAfterWrites)
                Self.arm(&deadlines.linger, at: now.advanced(by: configuration.lingerTimeout), .linger, now: now, &actions)
                return actions
            }
            state = .webSocket(watch)
            Self.arm(&deadlines.ping, at: now.advanced(by: configuration.webSocketPingInterval), .webSocketPing, now: now, &actions)
        case .writeStall:
            if state != .closed {
                state = .closed
                actions.append(.countClose("write_stall"))
                actions.append(.close)
            }
        }
        return actions
    }

    /// Graceful shutdown: an idle connection closes now, a busy one after its response.
    mutating func quiesce() -> Actions {
        var actions = Actions()
        switch state {
        case .awaitingHead(let waiting) where waiting.outstanding == 0:
            closeNow(&actions)
        case .awaitingHead, .request, .refusing:
            closeAfterResponse = true
        case .upgrading:
            closeNow(&actions)
        case .drainingRefusal:
            break
        case .webSocket, .closing, .closed:
            break
        }
        return actions
    }

    /// The client sent its last byte (half-close).
    mutating func inputEnded(now: C.Instant) -> Actions {
        var actions = Actions()
        switch state {
        case .awaitingHead(let waiting):
            if waiting.outstanding == 0 {
                closeNow(&actions)
            } else {
                // Requests already received are served, then the connection closes.
                inputClosed = true
            }
        case .request:
            inputClosed = true
            failInput(.incomplete, now: now, &actions)
        case .upgrading, .closing, .drainingRefusal:
            closeNow(&actions)
        case .refusing:
            closeAfterResponse = true
        case .webSocket, .closed:
            break
        }
        return actions
    }

    // MARK: Internals

    func refusal(for head: RequestHeadFacts, route: RouteInfo) -> ConnectionRefusal? {
        if head.isConnect {
            return ConnectionRefusal(
                status: .methodNotAllowed, body: APIErrorBody(message: "Method not allowed.", detail: "CONNECT is not supported."),
                headers: [.init(name: "Allow", value: "GET, POST")])
        }
        if case .other(let codings) = head.transferCoding {
            // RFC 9112 §6.1: a transfer coding the server does not know is answered 501; the
            // body cannot be framed, so the connection closes.
            return ConnectionRefusal(
                status: .notImplemented,
                body: APIErrorBody(
                    message: "Transfer coding not supported.", detail: "Only Transfer-Encoding: chunked is accepted; got \"\(codings)\"."))
        }
        if head.expectation == .other {
            return ConnectionRefusal(
                status: .expectationFailed, body: APIErrorBody(message: "Expectation failed.", detail: "Only \"100-continue\" is supported."))
        }
        if case .collect(let limit) = route.body, let declared = head.declaredLength, declared > limit {
            return ConnectionRefusal(status: .contentTooLarge, body: APIError.bodyTooLarge.body)
        }
        return nil
    }

    static func bodyPlan(_ head: RequestHeadFacts) -> RequestBodyPlan {
        let chunked = head.transferCoding == .chunked
        let declared = head.declaredLength ?? 0
        if !chunked && declared == 0 { return .empty }
        if !chunked && declared <= collectLimit { return .collect(declared: declared) }
        return .stream
    }

    mutating func forward(
        _ forwarded: ForwardedHead, route: RouteInfo, chunked: Bool, wantsContinue: Bool, outstanding: Int, now: C.Instant,
        _ actions: inout Actions
    ) {
        var request = Request(
            outstanding: outstanding + 1, idle: nil, chunkFraming: chunked ? ChunkFramingBudget() : nil,
            startsAtHead: !Self.isCollect(forwarded.body), handshake: forwarded.handshake)
        let deadline: Duration
        switch route.body {
        case .collect: deadline = configuration.bodyTimeout
        case .stream(let idle):
            request.idle = idle
            deadline = idle
        }
        if wantsContinue {
            if outstanding == 0 { actions.append(.send100Continue) } else { request.continuePending = true }
        }
        state = .request(request)
        actions.append(.forwardHead(forwarded))
        if forwarded.queued, !pausedForPipeline {
            let wasPaused = pausedForBody
            pausedForPipeline = true
            readsChanged(wasPaused: wasPaused, &actions)
        }
        Self.arm(&deadlines.body, at: now.advanced(by: deadline), .body, now: now, &actions)
    }

    static func isCollect(_ plan: RequestBodyPlan) -> Bool {
        if case .collect = plan { return true }
        return false
    }

    /// A body part or end outside a request: held while a handshake is being admitted,
    /// passed on once upgraded (frames), otherwise dropped (nothing is parsed after a
    /// refusal).
    mutating func partOutsideARequest(_ actions: inout Actions) {
        switch state {
        case .upgrading(var upgrading): holdPart(&upgrading, &actions)
        case .webSocket: actions.append(.forward)
        default: break
        }
    }

    mutating func holdPart(_ upgrading: inout Upgrading, _ actions: inout Actions) {
        upgrading.heldParts += 1
        if upgrading.heldParts > Self.maxHeldParts {
            closeNow(&actions)
        } else {
            state = .upgrading(upgrading)
            actions.append(.hold)
        }
    }

    mutating func enterWebSocket(_ actions: inout Actions) {
        // NIO's upgrader removes the decoder before it writes the 101; from here on the
        // bytes are frames.
        deadlines.head.at = nil
        deadlines.body.at = nil
        state = .webSocket(WebSocketWatch())
        actions.append(.switchToWebSocket)
        actions.append(.setPhase(.webSocket))
    }

    mutating func becomeIdle(now: C.Instant, _ actions: inout Actions) {
        actions.append(.setPhase(.awaitingHead))
        Self.arm(&deadlines.head, at: now.advanced(by: configuration.headTimeout), .head, now: now, &actions)
    }

    /// The input of the request being read failed: its body ends with `failure`, nothing
    /// more is read, and the connection closes after the responses under way (at once if
    /// there are none).
    mutating func failInput(_ failure: BodyFailure, now: C.Instant, _ actions: inout Actions) {
        guard case .request(let request) = state else { return }
        deadlines.body.at = nil
        actions.append(.failBody(failure))
        let outstanding = request.startsAtHead ? request.outstanding : request.outstanding - 1
        if outstanding <= 0 {
            closeNow(&actions)
        } else {
            state = .refusing(Refusing(refusal: nil, outstanding: outstanding))
        }
    }

    mutating func refuse(_ refusal: ConnectionRefusal, outstanding: Int, now: C.Instant, _ actions: inout Actions) {
        if outstanding == 0 {
            refuseNow(refusal, now: now, &actions)
        } else {
            // Written after the responses before it (ahead of the codec it would overtake them).
            state = .refusing(Refusing(refusal: refusal, outstanding: outstanding))
        }
    }

    mutating func refuseNow(_ refusal: ConnectionRefusal, now: C.Instant, _ actions: inout Actions) {
        actions.append(.refuse(refusal))
        closeGracefully(now: now, &actions)
    }

    mutating func closeGracefully(now: C.Instant, _ actions: inout Actions) {
        let wasWebSocket = isWebSocket
        state = .closing
        deadlines.head.at = nil
        deadlines.body.at = nil
        // Its last answer is written: while it lingers it is the first evicted.
        if !wasWebSocket { actions.append(.setPhase(.lingering)) }
        actions.append(.closeOutput)
        Self.arm(&deadlines.linger, at: now.advanced(by: configuration.lingerTimeout), .linger, now: now, &actions)
    }

    mutating func closeNow(_ actions: inout Actions) {
        state = .closed
        actions.append(.close)
    }

    mutating func resumeForPipelineIfDrained(_ actions: inout Actions) {
        guard pausedForPipeline else { return }
        let outstanding: Int
        switch state {
        case .awaitingHead(let waiting): outstanding = waiting.outstanding
        case .request(let request): outstanding = request.outstanding
        default: outstanding = 0
        }
        if outstanding <= 1 {
            pausedForPipeline = false
            readsChanged(wasPaused: true, &actions)
        }
    }

    mutating func readsChanged(wasPaused: Bool, _ actions: inout Actions) {
        let paused = pausedForBody || pausedForPipeline
        if paused != wasPaused { actions.append(paused ? .pauseReads : .resumeReads) }
    }

    /// Moves `deadline` to `at`; arms the timer only when no wake-up comes first.
    static func arm(_ deadline: inout Deadline, at: C.Instant, _ timer: ConnectionTimer, now: C.Instant, _ actions: inout Actions) {
        deadline.at = at
        if let scheduled = deadline.scheduled, scheduled <= at { return }
        deadline.scheduled = at
        actions.append(.armTimer(timer, now.duration(to: at)))
    }

    /// For a wake-up of `timer`: true if its deadline has passed (then cleared); false if
    /// none is set or it is still ahead (then re-armed for it).
    mutating func due(_ timer: ConnectionTimer, now: C.Instant, _ actions: inout Actions) -> Bool {
        var deadline: Deadline
        switch timer {
        case .head: deadline = deadlines.head
        case .body: deadline = deadlines.body
        case .linger: deadline = deadlines.linger
        case .webSocketPing: deadline = deadlines.ping
        case .writeStall: deadline = deadlines.stall
        }
        deadline.scheduled = nil
        var result = false
        if let at = deadline.at {
            if at > now {
                deadline.scheduled = at
                actions.append(.armTimer(timer, now.duration(to: at)))
            } else {
                deadline.at = nil
                result = true
            }
        }
        switch timer {
        case .head: deadlines.head = deadline
        case .body: deadlines.body = deadline
        case .linger: deadlines.linger = deadline
        case .webSocketPing: deadlines.ping = deadline
        case .writeStall: deadlines.stall = deadline
        }
        return result
    }

    static func seconds(_ duration: Duration) -> Int64 { duration.components.seconds }
}
