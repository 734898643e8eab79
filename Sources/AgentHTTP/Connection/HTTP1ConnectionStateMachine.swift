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
/// what the decoder cannot parse; chunk framing bounded (``ChunkFramingBudget``); bytes
/// held unparsed behind an upgrade request bounded (``maxHeldBytes``);
/// refusals of pipelined requests after the responses before them, dropped when one of
/// those closes the connection; a WebSocket handshake only as the first request (307
/// otherwise), within the WebSocket budget (503), masked frames (1002), a ping after a
/// silent interval and a 1001 close after another; shutdown closes an idle connection at
/// once and a busy one after its response; after the last answer the client may send for
/// ``Configuration/lingerTimeout`` before the close.
///
/// The machine owns every rule: its fields are private, and the handler only feeds events
/// and carries out actions. An event that breaks an invariant (a response ending that was
/// never started, a body part with no request) closes the connection, as NIO's
/// `HTTPServerPipelineHandler` does, instead of trapping. Deadlines are lazy
/// (``ConnectionDeadlines``); reads and pipelining are kept by ``ReadGate``; the last
/// response is decided by ``HTTP1CloseDecision``.
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

    typealias Action = HTTP1ConnectionAction

    /// A streamed body must bring this many bytes within each idle period (1 KiB a minute by
    /// default: 17 bytes a second) to keep its connection.
    static var minimumBodyProgress: Int { 1024 }
    typealias Actions = HTTP1ConnectionActions
    typealias ForwardedHead = HTTP1ForwardedHead
    typealias BodyFailure = HTTP1BodyFailure

    /// Bodies declared up to this length are collected before the handler runs.
    static var collectLimit: Int { 64 * 1024 }
    /// Most request parts held behind a handshake while its route prepares (a GET has
    /// one: its end); beyond it the connection closes.
    static var maxHeldParts: Int { 8 }
    /// Most bytes held unparsed: by the decoder once it stopped at an upgrade request, and by
    /// the handler while the connection switches to WebSocket; beyond it the connection closes.
    static var maxHeldBytes: Int { 1 << 20 }

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
        /// Body bytes since the idle deadline last moved: it moves only once
        /// ``minimumBodyProgress`` more came, so a trickle (a byte a minute) cannot keep an
        /// upload, its connection and its file open for ever.
        var progress = 0
        var chunkFraming: ChunkFramingBudget?
        /// `100 Continue` is owed once the responses before this one have ended.
        var continuePending = false
        /// The handler runs (or will at its turn) without waiting for the body's end.
        var startsAtHead: Bool
        /// A WebSocket handshake let through: its end makes the connection a WebSocket (its
        /// parts are not served).
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
        /// A frame (or, before the switch, bytes) came from the peer since the last tick.
        var heard = false
        /// A ping went out at the last tick and nothing came since.
        var pinged = false
    }

    struct Refusing: Sendable, Equatable {
        var refusal: ConnectionRefusal?
        var outstanding: Int
    }

    enum ParseError: Sendable, Equatable {
        /// The head outgrew a decoder limit (its line: 414; its fields: 431).
        case headerOverflow
        /// The input ended inside a head or a body (the client closed its side): in words.
        case endedEarly(String)
        /// Anything else, in words.
        case other(String)
    }

    private(set) var state: State
    private let configuration: Configuration
    /// Heads seen: only the first may be a WebSocket handshake.
    private var requestCount = 0
    private var closeDecision = HTTP1CloseDecision()
    private var reads = ReadGate()
    private var deadlines = ConnectionDeadlines<C.Instant>()
    /// A read is being passed to the decoder (a request ending inside it leaves the next
    /// request's line unmeasurable).
    private var inRead = false
    /// The connection holds a slot of the registry's WebSocket budget (given back when it ends).
    private var holdsWebSocketSlot = false
    /// Bytes wait for the socket (from ``writeBlocked(now:)`` or ``outputBlocked(now:)`` to
    /// ``writeUnblocked(now:)``): an idle connection's head deadline and a closing one's
    /// linger start only once the socket takes them (``deferredDeadline``), so a slow client's
    /// download of an answer made at once is bounded by the write-stall time, not cut by the
    /// time meant for its next request or its FIN with the answer's rest unsent.
    private var outputWaiting = false
    /// The head deadline or the linger, put off while ``outputWaiting``.
    private var deferredDeadline: ConnectionTimer?

    init(configuration: Configuration = .init()) {
        self.configuration = configuration
        self.state = .awaitingHead(AwaitingHead())
    }

    // MARK: Queries

    /// Whether the response being started must say `Connection: close`.
    var responseMustClose: Bool {
        switch state {
        case .awaitingHead(let waiting): closeDecision.responseMustClose(outstanding: waiting.outstanding, idle: true)
        default: closeDecision.responseMustClose(outstanding: 0, idle: false)
        }
    }

    /// A request line is being measured: the next read's first newline is wanted (the
    /// decoder scans for it only then).
    var measuresRequestLine: Bool {
        if case .awaitingHead(let waiting) = state { return waiting.line.length == nil && !waiting.line.unknown }
        return false
    }

    var isWebSocket: Bool {
        if case .webSocket = state { return true }
        return false
    }

    /// A handshake's route is deciding (request parts are held meanwhile).
    var isUpgrading: Bool {
        if case .upgrading = state { return true }
        return false
    }

    /// Requests are still served (those before a waiting refusal too).
    var isServing: Bool {
        switch state {
        case .awaitingHead, .request, .upgrading, .refusing: return true
        default: return false
        }
    }

    /// `read()` is withheld: a pipelined request waits, a streamed body's reader is full, or
    /// an answer's bytes wait for the socket.
    var readsPaused: Bool { reads.isPaused }

    /// Nothing more is served: the last answer is out or on its way, the output closes.
    var isClosing: Bool {
        if case .closing = state { return true }
        return false
    }

    /// The channel closed (``connectionClosed()``) or was refused at the door.
    var isClosed: Bool {
        if case .closed = state { return true }
        return false
    }

    // MARK: Connection

    /// The registry decided on the new connection.
    mutating func connectionOpened(_ admission: ConnectionAdmission, now: C.Instant) -> Actions {
        var actions = Actions()
        switch admission {
        case .admitted:
            deadlines.arm(.head, at: now.advanced(by: configuration.headTimeout), now: now, &actions)
        case .refused:
            state = .closed
            actions.append(.close)
        case .draining:
            // Answered 503 once the client sent something (an answer before the request
            // would race its write); a client that sends nothing is closed at the head deadline.
            state = .drainingRefusal
            deadlines.arm(.head, at: now.advanced(by: configuration.headTimeout), now: now, &actions)
        }
        return actions
    }

    /// The channel closed: what the connection held is given back.
    mutating func connectionClosed() -> Actions {
        var actions = Actions()
        state = .closed
        releaseWebSocketSlot(&actions)
        return actions
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
            refuseNow(.shuttingDown, now: now, &actions)
            return actions
        case .refusing, .closing, .closed:
            return actions
        }
        inRead = true
        actions.append(.forward)
        return actions
    }

    /// `count` bytes wait unparsed (``maxHeldBytes``): in the decoder, which stops after an
    /// upgrade request, or in the handler while the connection switches to WebSocket.
    mutating func bytesHeld(_ count: Int) -> Actions {
        var actions = Actions()
        guard count > Self.maxHeldBytes else { return actions }
        switch state {
        case .closing, .closed:
            // Input is dropped already (reads no longer reach the decoder).
            break
        default:
            closeNow(&actions)
        }
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
        // After a refusal nothing more is parsed; upgraded, the decoder yields nothing.
        guard case .awaitingHead(let waiting) = state else { return actions }
        deadlines.clear(.head)
        requestCount += 1
        let outstanding = waiting.outstanding
        if outstanding == 0 { actions.append(.setPhase(.busy)) }
        if outstanding > 0, !reads.queue() {
            closeNow(&actions)
            return actions
        }
        if var refusal = refusal(for: head, route: route) {
            refusal.omitsBody = head.isHead
            refuse(refusal, outstanding: outstanding, now: now, &actions)
            return actions
        }
        var forwarded = ForwardedHead()
        forwarded.keepAlive = head.keepAlive
        forwarded.queued = outstanding > 0
        forwarded.body = Self.bodyPlan(head)
        if !head.keepAlive { closeDecision.requestAsksClose(requestCount) }
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
                refuse(.upgradeOnNewConnection(location: head.uri), outstanding: outstanding, now: now, &actions)
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
            closeDecision.requestAsksClose(requestCount)
        }
        forward(forwarded, route: route, chunked: head.transferCoding == .chunked, wantsContinue: wantsContinue, outstanding: outstanding, now: now, &actions)
        return actions
    }

    /// A part of the body arrived (`bytes` of data).
    mutating func bodyReceived(bytes: Int, now: C.Instant) -> Actions {
        var actions = Actions()
        switch state {
        case .request(var request):
            if request.outstanding > 1, !reads.queue() {
                closeNow(&actions)
                return actions
            }
            request.chunkFraming?.data(bytes)
            if let idle = request.idle, deadlines.isSet(.body) {
                request.progress += bytes
                if request.progress >= Self.minimumBodyProgress {
                    request.progress = 0
                    deadlines.arm(.body, at: now.advanced(by: idle), now: now, &actions)
                }
            }
            state = .request(request)
            if !request.handshake { actions.append(.forward) }
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
            if request.outstanding > 1, !reads.queue() {
                closeNow(&actions)
                return actions
            }
            deadlines.clear(.body)
            if request.handshake {
                enterWebSocket(&actions)
                return actions
            }
            actions.append(.forward)
            var line = RequestLine()
            line.unknown = inRead
            state = .awaitingHead(AwaitingHead(outstanding: request.outstanding, line: line))
            if request.outstanding == 0 { becomeIdle(now: now, &actions) }
        default:
            partOutsideARequest(&actions)
        }
        return actions
    }

    /// The decoder could not parse the input.
    mutating func parseError(_ error: ParseError, now: C.Instant) -> Actions {
        var actions = Actions()
        switch state {
        case .awaitingHead(let waiting):
            deadlines.clear(.head)
            let refusal: ConnectionRefusal
            switch error {
            case .headerOverflow where waiting.line.exceeds(configuration.maxHeaderFieldSize):
                refusal = .requestLineTooLong(limit: configuration.maxHeaderFieldSize)
            case .headerOverflow:
                refusal = .headerFieldsTooLarge
            case .other(let detail), .endedEarly(let detail):
                refusal = .malformed(detail)
            }
            refuse(refusal, outstanding: waiting.outstanding, now: now, &actions)
        case .request:
            // Inside the body being served: its reader fails (its route answers 400) and
            // nothing after broken framing can be read.
            switch error {
            case .headerOverflow: failInput(.malformed("The request could not be parsed."), now: now, &actions)
            case .other(let detail): failInput(.malformed(detail), now: now, &actions)
            case .endedEarly: failInput(.incomplete, now: now, &actions)
            }
        case .upgrading:
            closeNow(&actions)
        default:
            break
        }
        return actions
    }

    /// The head the machine let through is not a valid HTTP request (its handler answers
    /// 400 through the codec): that answer is the connection's last.
    mutating func requestUnreadable() {
        closeDecision.closeAfterResponse()
    }

    // MARK: Responses

    /// A response head was written that says the connection closes (nothing may follow
    /// it, not even a waiting refusal).
    mutating func responseHeadSaysClose() {
        closeDecision.responseSaysClose()
    }

    /// A response ended.
    mutating func responseEnded(now: C.Instant) -> Actions {
        var actions = Actions()
        closeDecision.responseEnded()
        switch state {
        case .awaitingHead(var waiting):
            guard waiting.outstanding > 0 else {
                brokenInvariant(&actions)
                return actions
            }
            waiting.outstanding -= 1
            state = .awaitingHead(waiting)
            if closeDecision.lastResponseEnded || (waiting.outstanding == 0 && closeDecision.inputClosed) {
                closeGracefully(now: now, &actions)
            } else if waiting.outstanding == 0 {
                becomeIdle(now: now, &actions)
            }
        case .request(var request):
            guard request.outstanding > 0 else {
                brokenInvariant(&actions)
                return actions
            }
            request.outstanding -= 1
            if closeDecision.lastResponseEnded {
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
            guard refusing.outstanding > 0 else {
                brokenInvariant(&actions)
                return actions
            }
            refusing.outstanding -= 1
            if closeDecision.responseClosed {
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

    // MARK: Timers, shutdown, FIN

    /// The wake-up of `timer` came.
    mutating func timerFired(_ timer: ConnectionTimer, now: C.Instant) -> Actions {
        var actions = Actions()
        guard deadlines.due(timer, now: now, &actions) else { return actions }
        switch timer {
        case .head:
            switch state {
            case .awaitingHead(let waiting) where waiting.outstanding == 0:
                if waiting.line.bytes > 0 {
                    refuseNow(.headTimeout(seconds: Self.seconds(configuration.headTimeout)), now: now, &actions)
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
                refuseNow(.bodyTimeout(seconds: Self.seconds(configuration.bodyTimeout)), now: now, &actions)
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
                deadlines.arm(.linger, at: now.advanced(by: configuration.lingerTimeout), now: now, &actions)
                return actions
            }
            state = .webSocket(watch)
            deadlines.arm(.webSocketPing, at: now.advanced(by: configuration.webSocketPingInterval), now: now, &actions)
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
    /// (An idle one whose last answer still waits for the socket closes after it.)
    mutating func quiesce(now: C.Instant) -> Actions {
        var actions = Actions()
        switch state {
        case .awaitingHead(let waiting) where waiting.outstanding == 0:
            if outputWaiting, waiting.line.bytes == 0 {
                closeGracefully(now: now, &actions)
            } else {
                closeNow(&actions)
            }
        case .awaitingHead, .request, .refusing:
            closeDecision.closeAfterResponse()
        case .upgrading:
            closeNow(&actions)
        case .drainingRefusal, .webSocket, .closing, .closed:
            break
        }
        return actions
    }

    /// The client sent its last byte (half-close).
    mutating func inputEnded(now: C.Instant) -> Actions {
        var actions = Actions()
        switch state {
        case .awaitingHead(let waiting):
            if waiting.outstanding == 0, outputWaiting, waiting.line.bytes == 0 {
                // The client is done sending, not reading: its last answer goes out first.
                closeGracefully(now: now, &actions)
            } else if waiting.outstanding == 0 {
                closeNow(&actions)
            } else {
                // Requests already received are served, then the connection closes.
                closeDecision.inputEnded()
            }
        case .request:
            closeDecision.inputEnded()
            failInput(.incomplete, now: now, &actions)
        case .upgrading, .closing, .drainingRefusal:
            closeNow(&actions)
        case .refusing:
            closeDecision.closeAfterResponse()
        case .webSocket, .closed:
            break
        }
        return actions
    }

    // MARK: WebSocket

    /// The route's check and the WebSocket budget decided on the handshake of
    /// ``Action/admitWebSocket``.
    mutating func webSocketAdmission(_ admission: WebSocketAdmission, route: RouteInfo, now: C.Instant) -> Actions {
        var actions = Actions()
        guard case .upgrading(var upgrading) = state else {
            if case .admitted = admission { actions.append(.releaseWebSocketSlot) }
            return actions
        }
        switch admission {
        case .admitted(prepare: true):
            holdsWebSocketSlot = true
            upgrading.preparing = true
            state = .upgrading(upgrading)
            actions.append(.prepareWebSocket)
        case .admitted(prepare: false):
            holdsWebSocketSlot = true
            upgrading.forwarded.handshake = true
            forward(upgrading.forwarded, route: route, chunked: false, wantsContinue: upgrading.continuePending, outstanding: 0, now: now, &actions)
        case .checkFailed:
            upgrading.forwarded.rewrite.insert(.stripUpgrade)
            upgrading.forwarded.handshakeRefusal = .route
            forward(upgrading.forwarded, route: route, chunked: false, wantsContinue: upgrading.continuePending, outstanding: 0, now: now, &actions)
        case .noSlot:
            refuse(.tooManyWebSockets(configuration.maxWebSockets), outstanding: 0, now: now, &actions)
        }
        return actions
    }

    /// The route's `prepare` ended (after ``Action/prepareWebSocket``): the handshake goes on,
    /// or becomes a plain request for the route's twin. The handler then replays the parts
    /// it held, through the events as usual.
    mutating func webSocketPrepared(_ admitted: Bool, route: RouteInfo, now: C.Instant) -> Actions {
        var actions = Actions()
        guard case .upgrading(var upgrading) = state, upgrading.preparing else { return actions }
        if admitted {
            upgrading.forwarded.handshake = true
        } else {
            releaseWebSocketSlot(&actions)
            upgrading.forwarded.rewrite.insert(.stripUpgrade)
            upgrading.forwarded.handshakeRefusal = .route
        }
        forward(upgrading.forwarded, route: route, chunked: false, wantsContinue: upgrading.continuePending, outstanding: 0, now: now, &actions)
        return actions
    }

    /// The 101 is on the wire (the upgraded pipeline is set up): pings may go out.
    mutating func webSocketAnswered(now: C.Instant) -> Actions {
        var actions = Actions()
        guard case .webSocket(var watch) = state, !watch.answered else { return actions }
        watch.answered = true
        state = .webSocket(watch)
        deadlines.arm(.webSocketPing, at: now.advanced(by: configuration.webSocketPingInterval), now: now, &actions)
        return actions
    }

    /// NIO's upgrader would not take the handshake after all (its session could not be
    /// made): answered 400, and the connection closes.
    mutating func upgradeFailed(now: C.Instant) -> Actions {
        var actions = Actions()
        guard case .webSocket(let watch) = state, !watch.answered else { return actions }
        refuseNow(.upgradeFailed, now: now, &actions)
        return actions
    }

    /// A client frame arrived (the peer is heard). One without the mask bit (RFC 6455 §5.1):
    /// close 1002 and disconnect.
    mutating func webSocketFrameReceived(masked: Bool, now: C.Instant) -> Actions {
        var actions = Actions()
        guard case .webSocket(var watch) = state else { return actions }
        guard !masked else {
            watch.heard = true
            state = .webSocket(watch)
            return actions
        }
        state = .closing
        deadlines.clear(.webSocketPing)
        actions.append(.sendClose(code: 1002))
        actions.append(.closeAfterWrites)
        // A peer that does not read its close frame either is closed at the linger deadline.
        deadlines.arm(.linger, at: now.advanced(by: configuration.lingerTimeout), now: now, &actions)
        return actions
    }

    /// A WebSocket message broke a bound (``WebSocketMessageGuard``): the close frame with
    /// `code`, then a graceful close.
    mutating func webSocketViolation(code: UInt16, now: C.Instant) -> Actions {
        var actions = Actions()
        guard case .webSocket = state else { return actions }
        deadlines.clear(.webSocketPing)
        actions.append(.sendClose(code: code))
        closeGracefully(now: now, &actions)
        return actions
    }

    // MARK: Flow

    /// A write waits for the socket to take data (the channel is not writable).
    mutating func writeBlocked(now: C.Instant) -> Actions {
        var actions = Actions()
        outputWaiting = true
        deadlines.arm(.writeStall, at: now.advanced(by: configuration.writeStallTimeout), now: now, &actions)
        return actions
    }

    /// A response ended with its bytes still waiting for the socket (the channel is not
    /// writable): no more requests are read until it takes them, for at most the write-stall
    /// time. An answer made at once (HEAD, `/healthz`, a refusal) costs no wait of its own,
    /// so without this a client that sends and never reads would pile them up unsent.
    /// The head deadline (idle) or the linger (closing) already armed for it waits until then.
    mutating func outputBlocked(now: C.Instant) -> Actions {
        var actions = Actions()
        outputWaiting = true
        switch state {
        case .awaitingHead(let waiting) where waiting.outstanding == 0 && deadlines.isSet(.head):
            deadlines.clear(.head)
            deferredDeadline = .head
            actions.append(.setPhase(.busy))
        case .closing where deadlines.isSet(.linger):
            deadlines.clear(.linger)
            deferredDeadline = .linger
            actions.append(.setPhase(.busy))
        default:
            break
        }
        if !isClosing { _ = reads.output(blocked: true) }
        deadlines.arm(.writeStall, at: now.advanced(by: configuration.writeStallTimeout), now: now, &actions)
        return actions
    }

    /// The blocked socket took data since the last look: the write-stall deadline, if still
    /// set, starts again from now. (A look scheduled before the socket became writable again
    /// may still run: it finds no deadline and changes nothing.)
    mutating func writeProgressed(now: C.Instant) -> Actions {
        var actions = Actions()
        if deadlines.isSet(.writeStall) {
            deadlines.arm(.writeStall, at: now.advanced(by: configuration.writeStallTimeout), now: now, &actions)
        }
        return actions
    }

    /// The write-stall deadline, if set, moves `delay` later: time the loop could not look at
    /// the socket (its wake-up ran that late) does not count against the client.
    mutating func postponeWriteStall(by delay: Duration) {
        deadlines.postpone(.writeStall, by: delay)
    }

    /// The socket takes data again: reads resume if only the output held them, and the
    /// deadline put off meanwhile starts.
    mutating func writeUnblocked(now: C.Instant) -> Actions {
        var actions = Actions()
        outputWaiting = false
        deadlines.clear(.writeStall)
        if reads.output(blocked: false) { actions.append(.resumeReads) }
        let deferred = deferredDeadline
        deferredDeadline = nil
        switch (deferred, state) {
        case (.head, .awaitingHead(let waiting)) where waiting.outstanding == 0:
            actions.append(.setPhase(.awaitingHead))
            deadlines.arm(.head, at: now.advanced(by: configuration.headTimeout), now: now, &actions)
        case (.linger, .closing):
            actions.append(.setPhase(.lingering))
            deadlines.arm(.linger, at: now.advanced(by: configuration.lingerTimeout), now: now, &actions)
        default:
            break
        }
        return actions
    }

    /// The streamed body's reader has enough buffered (true) or wants more (false).
    mutating func bodyBackPressure(stop: Bool) -> Actions {
        var actions = Actions()
        if reads.body(stop: stop) { actions.append(.resumeReads) }
        return actions
    }

    // MARK: Internals

    private func refusal(for head: RequestHeadFacts, route: RouteInfo) -> ConnectionRefusal? {
        if head.isConnect { return .connect }
        if case .other(let codings) = head.transferCoding { return .transferCoding(codings) }
        if head.expectation == .other { return .expectation }
        if case .collect(let limit) = route.body, let declared = head.declaredLength, declared > limit { return .bodyTooLarge }
        return nil
    }

    /// How the body of `head` is taken: the one plan, carried to the handler in the
    /// forwarded head.
    static func bodyPlan(_ head: RequestHeadFacts) -> RequestBodyPlan {
        let chunked = head.transferCoding == .chunked
        let declared = head.declaredLength ?? 0
        if !chunked && declared == 0 { return .empty }
        if !chunked && declared <= collectLimit { return .collect(declared: declared) }
        return .stream
    }

    private mutating func forward(
        _ forwarded: ForwardedHead, route: RouteInfo, chunked: Bool, wantsContinue: Bool, outstanding: Int, now: C.Instant,
        _ actions: inout Actions
    ) {
        var request = Request(
            outstanding: outstanding + 1, idle: nil, chunkFraming: chunked ? ChunkFramingBudget() : nil,
            startsAtHead: !forwarded.body.isCollect, handshake: forwarded.handshake)
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
        if forwarded.queued { reads.pauseForPipeline() }
        deadlines.arm(.body, at: now.advanced(by: deadline), now: now, &actions)
    }

    /// A body part or end outside a request: held while a handshake is being admitted,
    /// dropped after a refusal or an upgrade (nothing is parsed then); with no request at
    /// all, the decoder broke its framing.
    private mutating func partOutsideARequest(_ actions: inout Actions) {
        switch state {
        case .upgrading(var upgrading):
            upgrading.heldParts += 1
            if upgrading.heldParts > Self.maxHeldParts {
                closeNow(&actions)
            } else {
                state = .upgrading(upgrading)
                actions.append(.hold)
            }
        case .awaitingHead: brokenInvariant(&actions)
        default: break
        }
    }

    private mutating func enterWebSocket(_ actions: inout Actions) {
        // NIO's upgrader removes the decoder before it writes the 101; from here on the
        // bytes are frames.
        deadlines.clear(.head)
        deadlines.clear(.body)
        state = .webSocket(WebSocketWatch())
        actions.append(.switchToWebSocket)
        actions.append(.setPhase(.webSocket))
    }

    /// Awaits the next request; while the answer still waits for the socket the connection
    /// stays busy (not the first evicted) and the head deadline waits for it.
    private mutating func becomeIdle(now: C.Instant, _ actions: inout Actions) {
        if outputWaiting {
            deferredDeadline = .head
        } else {
            actions.append(.setPhase(.awaitingHead))
            deadlines.arm(.head, at: now.advanced(by: configuration.headTimeout), now: now, &actions)
        }
    }

    /// The input of the request being read failed: its body ends with `failure`, nothing
    /// more is read, and the connection closes after the responses under way (at once if
    /// there are none). A handler that started at the head answers the failure itself; for
    /// one still waiting for its collected body, which never runs, the core answers it (400)
    /// once the responses before it are written.
    private mutating func failInput(_ failure: BodyFailure, now: C.Instant, _ actions: inout Actions) {
        guard case .request(let request) = state else { return }
        deadlines.clear(.body)
        actions.append(.failBody(failure))
        if !request.startsAtHead {
            let refusal: ConnectionRefusal
            switch failure {
            case .incomplete: refusal = .bodyIncomplete
            case .malformed(let detail): refusal = .malformed(detail)
            }
            refuse(refusal, outstanding: request.outstanding - 1, now: now, &actions)
            return
        }
        let outstanding = request.outstanding
        if outstanding <= 0 {
            closeNow(&actions)
        } else {
            state = .refusing(Refusing(refusal: nil, outstanding: outstanding))
        }
    }

    private mutating func refuse(_ refusal: ConnectionRefusal, outstanding: Int, now: C.Instant, _ actions: inout Actions) {
        if outstanding == 0 {
            refuseNow(refusal, now: now, &actions)
        } else {
            // Written after the responses before it (ahead of the codec it would overtake them).
            state = .refusing(Refusing(refusal: refusal, outstanding: outstanding))
        }
    }

    private mutating func refuseNow(_ refusal: ConnectionRefusal, now: C.Instant, _ actions: inout Actions) {
        actions.append(.refuse(refusal))
        closeGracefully(now: now, &actions)
    }

    /// The last answer is written: our side closes, input is read and dropped until the
    /// client closes or the linger deadline passes.
    private mutating func closeGracefully(now: C.Instant, _ actions: inout Actions) {
        let wasWebSocket = isWebSocket
        state = .closing
        deadlines.clear(.head)
        deadlines.clear(.body)
        if reads.open() { actions.append(.resumeReads) }
        actions.append(.closeOutput)
        // A WebSocket's close frame waits for no download: the linger bounds its handshake.
        if outputWaiting, !wasWebSocket {
            deferredDeadline = .linger
        } else {
            // Its last answer is written: while it lingers it is the first evicted.
            if !wasWebSocket { actions.append(.setPhase(.lingering)) }
            deferredDeadline = nil
            deadlines.arm(.linger, at: now.advanced(by: configuration.lingerTimeout), now: now, &actions)
        }
    }

    private mutating func closeNow(_ actions: inout Actions) {
        state = .closed
        actions.append(.close)
    }

    /// An event the rules cannot follow (the decoder's or the handler's mistake): the
    /// connection closes rather than serving from a state it cannot trust.
    private mutating func brokenInvariant(_ actions: inout Actions) {
        state = .closed
        actions.append(.countClose("invariant"))
        actions.append(.close)
    }

    private mutating func resumeForPipelineIfDrained(_ actions: inout Actions) {
        let outstanding: Int
        switch state {
        case .awaitingHead(let waiting): outstanding = waiting.outstanding
        case .request(let request): outstanding = request.outstanding
        default: outstanding = 0
        }
        if outstanding <= 1, reads.pipelineDrained() { actions.append(.resumeReads) }
    }

    private mutating func releaseWebSocketSlot(_ actions: inout Actions) {
        guard holdsWebSocketSlot else { return }
        holdsWebSocketSlot = false
        actions.append(.releaseWebSocketSlot)
    }

    private static func seconds(_ duration: Duration) -> Int64 { duration.components.seconds }
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

extension RequestBodyPlan {
    var isCollect: Bool {
        if case .collect = self { return true }
        return false
    }
}
