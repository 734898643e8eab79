import HTTPTypes

/// One HTTP/1 connection's state, without I/O: events in (bytes seen, request parts from
/// the decoder, responses written, timers, shutdown, the client's FIN), actions out
/// (``Action``), which the connection's channel handler carries out. Every deadline is a
/// timer action at an instant of the injected clock, so each hardening rule is testable as a
/// sequence of events with a manual clock.
///
/// The rules it keeps: a complete head within ``Configuration/headTimeout`` of the accept or
/// the previous exchange (408 if part of one came, a silent close otherwise); the body
/// within ``Configuration/bodyTimeout`` (collected) or without a pause longer than the
/// route's idle time (streamed); 413 on a declared length over the route's limit, 501 for an
/// unknown transfer coding, 405 for CONNECT, 417 for an expectation other than
/// `100-continue`, which is answered only when its request is taken up; 400/414/431 for
/// what the decoder cannot parse; chunk framing bounded (``ChunkFramingBudget``);
/// refusals of pipelined requests after the responses before them, dropped when one of
/// those closes the connection; a WebSocket handshake only as the first request (307
/// otherwise), within the WebSocket budget (503), masked frames (1002), a ping after a
/// silent interval and a 1001 close after another; shutdown closes an idle connection at
/// once and a busy one after its response; after the last answer the client may send for
/// ``Configuration/lingerTimeout`` before the close.
///
/// Deadlines are lazy: moving one is a clock read; a timer is armed only when the new
/// deadline comes before the wake-up already scheduled, and a wake-up that comes early
/// re-arms for the deadline then current.
struct HTTP1ConnectionStateMachine<C: Clock> where C.Duration == Duration {
    struct Configuration: Sendable {
        /// A complete request head within this of the accept or the previous exchange.
        var headTimeout: Duration = AgentHTTPLimits.requestHeadTimeout
        /// A collected body within this of its head.
        var bodyTimeout: Duration = AgentHTTPLimits.requestBodyTimeout
        /// After the last answer, the client's remaining bytes are read and dropped this long.
        var lingerTimeout: Duration = .seconds(2)
        /// A silent WebSocket peer is pinged after this, and closed after as long again.
        var webSocketPingInterval: Duration = AgentHTTPLimits.webSocketPingInterval
        /// A response write waiting this long for the socket closes the connection.
        var writeStallTimeout: Duration = AgentHTTPLimits.responseWriteStallTimeout
        /// The registry's WebSocket budget (named in the 503).
        var maxWebSockets: Int = AgentHTTPLimits.maxWebSockets
        /// The decoder's limit on a request line or header field (414 vs 431).
        var maxHeaderFieldSize: Int = AgentHTTPLimits.maxHeaderFieldSize

        init() {}
    }

    /// Bodies declared up to this length are collected before the handler runs.
    static var collectLimit: Int { 64 * 1024 }
    /// Most requests decoded ahead of their answer (pipelining); beyond it the connection
    /// closes. Reads stop while any waits, so normally at most one read's worth waits.
    static var maxPipelinedRequests: Int { 256 }
    /// Most request parts held behind a handshake while its route prepares (a GET has
    /// one: its end); beyond it the connection closes.
    static var maxHeldParts: Int { 8 }

    /// Where the connection is.
    enum State: Sendable, Equatable {
        /// Waiting for a request head; `outstanding` earlier responses are still being
        /// written (pipelining). The head deadline runs only when none is.
        case awaitingHead(AwaitingHead)
        /// A request let through whose body has not ended.
        case request(Request)
        /// A WebSocket handshake admitted by its route, held while the route prepares.
        case upgrading(Upgrading)
        /// Upgraded: client frames are checked for masks, a silent peer is pinged.
        case webSocket(WebSocketWatch)
        /// Input is dropped; once the `outstanding` responses have ended, the refusal (if
        /// any) is written and the connection closes gracefully.
        case refusing(Refusing)
        /// The agent is shutting down: the first bytes are answered 503.
        case drainingRefusal
        /// The last answer is written: input is dropped until the client closes or the
        /// linger deadline passes.
        case closing
        case closed
    }

    struct RequestLine: Sendable, Equatable {
        /// Bytes received since the request began (a partial head when > 0).
        var bytes = 0
        /// Length of the request's first line, once it ended.
        var length: Int?
        /// The request began inside a read already passed on: its line cannot be measured.
        var unknown = false
    }

    struct AwaitingHead: Sendable, Equatable {
        var outstanding = 0
        var line = RequestLine()
    }

    struct Request: Sendable, Equatable {
        /// Responses not yet ended, this request's included.
        var outstanding: Int
        /// A streamed body's idle deadline; nil: a total deadline.
        var idle: Duration?
        var chunkFraming: ChunkFramingBudget?
        /// `100 Continue` is owed once the responses before this one have ended.
        var continuePending = false
        /// The handler runs (or will at its turn) without waiting for the body's end.
        var startsAtHead: Bool
        /// A WebSocket handshake let through: its end makes the connection a WebSocket.
        var handshake: Bool
    }

    struct Upgrading: Sendable, Equatable {
        var forwarded: ForwardedHead
        var heldParts = 0
        /// The head's `Expect: 100-continue` is owed once let through.
        var continuePending = false
        var preparing = false
    }

    struct WebSocketWatch: Sendable, Equatable {
        /// The 101 is on the wire: pings may go out.
        var answered = false
        /// Bytes came from the peer since the last tick.
        var heard = false
        /// A ping went out at the last tick and nothing came since.
        var pinged = false
    }

    struct Refusing: Sendable, Equatable {
        var refusal: ConnectionRefusal?
        var outstanding: Int
    }

    /// One deadline and the wake-up scheduled for it.
    struct Deadline: Sendable, Equatable {
        var at: C.Instant?
        var scheduled: C.Instant?
    }

    /// Internal (not private) only so that the extension files of the machine reach it.
    var state: State
    let configuration: Configuration
    /// Heads seen: only the first may be a WebSocket handshake.
    var requestCount = 0
    /// The connection closes after the response in progress (shutdown, the client's FIN,
    /// broken framing).
    var closeAfterResponse = false
    /// The number of the first request that asked to close (HTTP/1.0 or `Connection:
    /// close`): its response is the last, however many requests were pipelined before it.
    var closeAfterRequest: Int?
    /// Responses ended so far (numbered as the requests they answer).
    var responsesEnded = 0
    /// The response that just ended, or is being started, is the connection's last.
    private var isLastResponse: Bool {
        closeAfterResponse || closeAfterRequest.map { responsesEnded >= $0 } ?? false
    }
    /// The client half-closed: pipelined requests are served, then the connection closes.
    var inputClosed = false
    /// A response written here said it closes the connection.
    var responseCloses = false
    /// A read is being passed to the decoder (a request ending inside it leaves the next
    /// request's line unmeasurable).
    var inRead = false
    var pausedForPipeline = false
    var pausedForBody = false
    var deadlines = (
        head: Deadline(), body: Deadline(), linger: Deadline(), ping: Deadline(), stall: Deadline()
    )

    init(configuration: Configuration = .init()) {
        self.configuration = configuration
        self.state = .awaitingHead(AwaitingHead())
    }

    /// Whether the response being started must say `Connection: close`.
    var responseMustClose: Bool {
        if closeAfterResponse { return true }
        if let last = closeAfterRequest, responsesEnded + 1 >= last { return true }
        guard inputClosed else { return false }
        switch state {
        case .awaitingHead(let waiting): return waiting.outstanding <= 1
        default: return true
        }
    }

    /// Whether the raw bytes of the current request must be kept (a handshake's frames
    /// may follow its head in the same read): until its head shows it is not one.
    var wantsHeadCopy: Bool {
        switch state {
        case .awaitingHead, .upgrading: return true
        case .request(let request): return request.handshake
        default: return false
        }
    }

    var isWebSocket: Bool {
        if case .webSocket = state { return true }
        return false
    }

    // MARK: Connection

    /// The registry decided on the new connection.
    mutating func connectionOpened(_ admission: ConnectionAdmission, now: C.Instant) -> Actions {
        var actions = Actions()
        switch admission {
        case .admitted:
            Self.arm(&deadlines.head, at: now.advanced(by: configuration.headTimeout), .head, now: now, &actions)
        case .refused:
            state = .closed
            actions.append(.close)
        case .draining:
            // Answered 503 once the client sent something (an answer before the request
            // would race its write); a client that sends nothing is closed at the head deadline.
            state = .drainingRefusal
            Self.arm(&deadlines.head, at: now.advanced(by: configuration.headTimeout), .head, now: now, &actions)
        }
        return actions
    }

    /// The channel closed.
    mutating func connectionClosed() {
        state = .closed
    }

    // MARK: Raw bytes

    /// A read of `count` bytes arrived; `newline` is the offset of its first `\n`, if any.
    /// `.forward` passes it to the decoder; no action drops it.
    mutating func bytesReceived(count: Int, newline: Int?, now: C.Instant) -> Actions {
        var actions = Actions()
        switch state {
        case .awaitingHead(var waiting):
            waiting.line.received(count, newline: newline)
            state = .awaitingHead(waiting)
        case .request(var request):
            request.chunkFraming?.received(count)
            state = .request(request)
        case .webSocket(var watch):
            watch.heard = true
            state = .webSocket(watch)
        case .upgrading:
            break
        case .drainingRefusal:
            refuseNow(
                ConnectionRefusal(
                    status: .serviceUnavailable,
                    body: APIErrorBody(message: "The agent is shutting down.", detail: "It accepts no new connections.")),
                now: now, &actions)
            return actions
        case .refusing, .closing, .closed:
            return actions
        }
        inRead = true
        actions.append(.forward)
        return actions
    }

    /// The read passed on has been decoded.
    mutating func bytesProcessed(now: C.Instant) -> Actions {
        inRead = false
        var actions = Actions()
        if case .request(var request) = state, request.chunkFraming?.isExceeded == true {
            request.chunkFraming = nil
            state = .request(request)
            failInput(
                .malformed("More than \(ChunkFramingBudget.maxExcess) bytes of chunk framing (sizes, extensions) beyond what the chunks' data allows."),
                now: now, &actions)
        }
        return actions
    }

    // MARK: Request parts

    /// The decoder produced a request head; `route` is what the route table says of it.
    mutating func headReceived(_ head: RequestHeadFacts, route: RouteInfo, now: C.Instant) -> Actions {
        var actions = Actions()
        guard case .awaitingHead(let waiting) = state else {
            // After a refusal nothing more is parsed; upgraded, it is not HTTP.
            if case .webSocket = state { actions.append(.forward) }
            return actions
        }
        deadlines.head.at = nil
        requestCount += 1
        let outstanding = waiting.outstanding
        if outstanding == 0 { actions.append(.setPhase(.busy)) }
        if outstanding >= Self.maxPipelinedRequests {
            closeNow(&actions)
            return actions
        }
        if let refusal = refusal(for: head, route: route) {
            refuse(refusal, outstanding: outstanding, now: now, &actions)
            return actions
        }
        var forwarded = ForwardedHead()
        forwarded.keepAlive = head.keepAlive
        forwarded.queued = outstanding > 0
        forwarded.body = Self.bodyPlan(head)
        if !head.keepAlive, closeAfterRequest == nil { closeAfterRequest = requestCount }
        let wantsContinue = head.expectation == .continue100
        if wantsContinue { forwarded.rewrite.insert(.removeExpect) }
        switch head.upgrade {
        case .none:
            break
        case .other:
            forwarded.rewrite.insert(.stripUpgrade)
        case .webSocket(let versionOK, let keyOK):
            guard route.webSocket != nil else {
                forwarded.rewrite.insert(.stripUpgrade)
                break
            }
            if requestCount > 1 {
                // Too late on this connection: the client is sent to a new one.
                refuse(
                    ConnectionRefusal(
                        status: .temporaryRedirect,
                        body: APIErrorBody(message: "Upgrade on a new connection.", detail: "A WebSocket handshake must be a connection's first request."),
                        headers: [.init(name: "Location", value: head.uri)]),
                    outstanding: outstanding, now: now, &actions)
                return actions
            }
            if !versionOK || !keyOK {
                forwarded.rewrite.insert(.stripUpgrade)
                forwarded.handshakeRefusal = versionOK ? .badKey : .badVersion
                break
            }
            state = .upgrading(Upgrading(forwarded: forwarded, continuePending: wantsContinue))
            actions.append(.admitWebSocket)
            return actions
        }
        if head.decoderStops {
            // An upgrade not taken: the decoder reads nothing after it, so the answer ends
            // the connection (the client's next request goes on a new one) instead of
            // leaving it to stall until the head deadline.
            forwarded.keepAlive = false
            closeAfterRequest = min(closeAfterRequest ?? requestCount, requestCount)
        }
        forward(forwarded, route: route, chunked: head.transferCoding == .chunked, wantsContinue: wantsContinue, outstanding: outstanding, now: now, &actions)
        return actions
    }

    /// A part of the body arrived (`bytes` of data).
    mutating func bodyReceived(bytes: Int, now: C.Instant) -> Actions {
        var actions = Actions()
        switch state {
        case .request(var request):
            request.chunkFraming?.data(bytes)
            state = .request(request)
            if let idle = request.idle, deadlines.body.at != nil {
                Self.arm(&deadlines.body, at: now.advanced(by: idle), .body, now: now, &actions)
            }
            actions.append(.forward)
        default:
            partOutsideARequest(&actions)
        }
        return actions
    }

    /// The request's end arrived.
    mutating func endReceived(now: C.Instant) -> Actions {
        var actions = Actions()
        switch state {
        case .request(let request):
            deadlines.body.at = nil
            actions.append(.forward)
            if request.handshake {
                enterWebSocket(&actions)
                return actions
            }
            var line = RequestLine()
            line.unknown = inRead
            state = .awaitingHead(AwaitingHead(outstanding: request.outstanding, line: line))
            if request.outstanding == 0 { becomeIdle(now: now, &actions) }
        default:
            partOutsideARequest(&actions)
        }
        return actions
    }

    enum ParseError: Sendable, Equatable {
        /// The head outgrew a decoder limit (its line: 414; its fields: 431).
        case headerOverflow
        /// Anything else, in words.
        case other(String)
    }

    /// The decoder could not parse the input.
    mutating func parseError(_ error: ParseError, now: C.Instant) -> Actions {
        var actions = Actions()
        switch state {
        case .awaitingHead(let waiting):
            deadlines.head.at = nil
            let refusal: ConnectionRefusal
            switch error {
            case .headerOverflow where waiting.line.exceeds(configuration.maxHeaderFieldSize):
                refusal = ConnectionRefusal(
                    status: .uriTooLong,
                    body: APIErrorBody(message: "Request line too long.", detail: "The limit is \(configuration.maxHeaderFieldSize) bytes."))
            case .headerOverflow:
                refusal = ConnectionRefusal(
                    status: .requestHeaderFieldsTooLarge,
                    body: APIErrorBody(
                        message: "Request header fields too large.",
                        detail: "The limits are \(AgentHTTPLimits.maxHeaderFieldSize) bytes a field, \(AgentHTTPLimits.maxHeaderListSize) bytes in all and \(AgentHTTPLimits.maxHeaderFieldCount) fields."))
            case .other(let detail):
                refusal = ConnectionRefusal(status: .badRequest, body: APIErrorBody(message: "Malformed HTTP request.", detail: detail))
            }
            refuse(refusal, outstanding: waiting.outstanding, now: now, &actions)
        case .request:
            // Inside the body being served: its reader fails (its route answers 400) and
            // nothing after broken framing can be read.
            switch error {
            case .headerOverflow: failInput(.malformed("The request could not be parsed."), now: now, &actions)
            case .other(let detail): failInput(.malformed(detail), now: now, &actions)
            }
        case .upgrading:
            closeNow(&actions)
        default:
            break
        }
        return actions
    }

    // MARK: Responses

    /// A response head was written; `closes`: it says the connection closes (nothing may
    /// follow it, not even a waiting refusal).
    mutating func responseHeadWritten(switchingProtocols: Bool, closes: Bool) -> Actions {
        var actions = Actions()
        if switchingProtocols {
            if case .request(let request) = state, request.handshake { enterWebSocket(&actions) }
            return actions
        }
        if closes { responseCloses = true }
        return actions
    }

    /// A response ended.
    mutating func responseEnded(now: C.Instant) -> Actions {
        var actions = Actions()
        responsesEnded += 1
        switch state {
        case .awaitingHead(var waiting):
            waiting.outstanding = max(0, waiting.outstanding - 1)
            state = .awaitingHead(waiting)
            if responseCloses || isLastResponse {
                closeGracefully(now: now, &actions)
            } else if waiting.outstanding == 0 {
                if inputClosed {
                    closeGracefully(now: now, &actions)
                } else {
                    becomeIdle(now: now, &actions)
                }
            }
        case .request(var request):
            request.outstanding = max(0, request.outstanding - 1)
            if responseCloses || isLastResponse {
                state = .request(request)
                closeGracefully(now: now, &actions)
                return actions
            }
            if request.outstanding == 1, request.continuePending {
                // The request is taken up now: its client may send the body.
                request.continuePending = false
                actions.append(.send100Continue)
            }
            state = .request(request)
        case .refusing(var refusing):
            refusing.outstanding = max(0, refusing.outstanding - 1)
            if responseCloses {
                closeGracefully(now: now, &actions)
            } else if refusing.outstanding == 0 {
                if let refusal = refusing.refusal {
                    refuseNow(refusal, now: now, &actions)
                } else {
                    closeGracefully(now: now, &actions)
                }
            } else {
                state = .refusing(refusing)
            }
            return actions
        default:
            return actions
        }
        resumeForPipelineIfDrained(&actions)
        return actions
    }

}

extension HTTP1ConnectionStateMachine.RequestLine {
    mutating func received(_ count: Int, newline: Int?) {
        if length == nil, !unknown, let newline { length = bytes + newline }
        bytes += count
    }

    /// For a head the decoder found too large: whether its request line is what
    /// overflowed (measured, or not ended so far); false when it could not be measured.
    func exceeds(_ limit: Int) -> Bool {
        if let length { return length > limit }
        return !unknown
    }
}
