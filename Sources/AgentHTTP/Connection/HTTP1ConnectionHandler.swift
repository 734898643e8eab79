import AgentCore
import FoundationEssentials
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOWebSocket

/// Serves one HTTP/1 connection after NIO's decoder: feeds every event to the connection's
/// ``HTTP1ConnectionStateMachine`` and carries out its actions. The rules live in the
/// machine; what is here is I/O and the data of the request in progress: the route task
/// (one per request, on the connection's loop or on the global executor as its route says),
/// its body (collected up to ``HTTP1ConnectionStateMachine/collectLimit``, otherwise
/// streamed with back pressure), the requests pipelined behind it, the response's write
/// path and the access log. ``HTTP1RequestDecoder`` reports the raw reads to it.
///
/// A WebSocket handshake the machine let through is upgraded here (NIO's WebSocket
/// upgrader builds the 101 and the frame handlers; ``beginUpgrade()``); the handler then
/// leaves the pipeline, and ``WebSocketMessageGuard`` reports the frames and the close.
///
/// Used only on the connection's event loop.
final class HTTP1ConnectionHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart
    typealias Machine = HTTP1ConnectionStateMachine<ContinuousClock>

    /// What every connection of a server shares.
    final class Configuration: Sendable {
        let responder: AgentResponder
        let serverName: String?
        let logger: Logger
        /// One line per request at info (``AccessLog``).
        let accessLog: AccessLog
        let routes: any RouteLookup
        let machine: Machine.Configuration
        let registry: HTTPConnectionRegistry

        init(
            responder: AgentResponder, serverName: String?, logger: Logger, accessLog: Bool = true, routes: any RouteLookup,
            machine: Machine.Configuration, registry: HTTPConnectionRegistry
        ) {
            self.responder = responder
            self.serverName = serverName
            self.logger = logger
            self.accessLog = AccessLog(logger: logger, enabled: accessLog)
            self.routes = routes
            self.machine = machine
            self.registry = registry
        }
    }

    /// A response body of known length up to this goes out in one flush with its head.
    static let singleFlushLimit = 64 * 1024

    /// A head the machine let through, with what the machine and the route table said of it:
    /// it travels with its request (queued or not), so nothing is looked up or decided twice.
    struct ServedHead {
        var head: HTTPRequestHead
        var route: RouteInfo
        var body: RequestBodyPlan
        /// A handshake refused for its key (its route's plain twin answers 400).
        var keyRefused: Bool
    }

    /// A request part let through, as it waits or is served.
    enum ServedPart {
        case head(ServedHead)
        case body(ByteBuffer)
        case end

        var isHead: Bool {
            if case .head = self { return true }
            return false
        }
    }

    let configuration: Configuration
    let origin: ConnectionOrigin
    let upgrade: WebSocketUpgrade
    var machine: Machine
    let clock = ContinuousClock()
    /// When the read being decoded arrived (nil between reads).
    var readInstant: ContinuousClock.Instant?

    var context: ChannelHandlerContext?
    /// Where raw bytes (refusals, `100 Continue`, pings and close frames) are written ahead
    /// of the codec: the response encoder's context, after an upgrade the frame encoder's
    /// (the first handlers; NIO offers no handle on the pipeline's head).
    var raw: ChannelHandlerContext?
    var executor: EventLoopTaskExecutor?
    var registration: (id: UInt64, phase: HTTPConnectionRegistry.PhaseCell)?
    var timers: [Scheduled<Void>?] = Array(repeating: nil, count: ConnectionTimer.allCases.count)
    /// The write-stall wake-up's last look: one that finds bytes gone, or comes late, moves
    /// the deadline instead of closing.
    var stallWatch = WriteStallWatch<ContinuousClock.Instant>()
    var date = HTTPDate()
    var connectionContext: AgentRequestContext?
    var connectionObserver: ConnectionObserver?
    /// The head the machine is deciding on, and its route (held during a handshake's admission).
    var pending: (head: HTTPRequestHead, route: RouteInfo)?
    /// Parts held while a handshake's route prepares (the machine bounds how many).
    var heldParts: [HTTPServerRequestPart] = []
    /// The WebSocket handshake being upgraded.
    var handshake: (head: HTTPRequestHead, route: RouteInfo)?

    // The request being served (data, not rules).
    /// Numbers the exchanges: a task's late call cannot touch the next request's response.
    var exchange: UInt64 = 0
    /// The exchange whose route task runs (its response has not ended).
    var responding: UInt64?
    /// The running exchange is a HEAD: its answer's head goes out without the body
    /// (RFC 9110 §9.3.2), or the client would read the body as the next answer.
    var answersHead = false
    var collecting: (head: ServedHead, declared: Int, body: ByteBuffer)?
    var bodyStream: RequestBodyStream.Source?
    /// Parts of requests pipelined behind the running one (the machine bounds them and
    /// withholds reads meanwhile).
    var pipelined = CircularBuffer<ServedPart>()
    /// Set while pipelined parts are passed on: a route answered inside `Task.immediate`
    /// ends its response within that pass, which must not start a second one.
    var draining = false
    /// A `read()` withheld while the machine said reads are paused (NIO's outbound `read`
    /// cannot be answered later any other way).
    var readPending = false
    var writable: EventLoopPromise<Void>?
    var access: AccessLog.Entry?

    init(configuration: Configuration, origin: ConnectionOrigin, upgrade: WebSocketUpgrade) {
        self.configuration = configuration
        self.origin = origin
        self.upgrade = upgrade
        self.machine = Machine(configuration: configuration.machine)
    }

    // MARK: Lifecycle

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        raw = try? context.pipeline.syncOperations.context(handlerType: HTTPResponseEncoder.self)
        executor = EventLoopTaskExecutor(context.eventLoop)
        connectionObserver = ConnectionObserver(watching: context.channel)
        let admission: ConnectionAdmission
        switch configuration.registry.admit(context.channel) {
        case .admitted(let id, let phase):
            registration = (id, phase)
            admission = .admitted
        case .refused:
            admission = .refused
        case .draining:
            admission = .draining
        }
        perform(machine.connectionOpened(admission, now: clock.now))
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        // Handed over to the frame handlers, the connection lives on: the message guard
        // reports its end.
        if upgrade.phase != .handedOver { connectionEnded() }
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        connectionEnded()
        context.fireChannelInactive()
    }

    /// The connection ended (idempotent: the handler's removal and the channel's close may
    /// both report it).
    func connectionEnded() {
        if let registration { configuration.registry.remove(registration.id) }
        registration = nil
        perform(machine.connectionClosed())
        for index in timers.indices {
            timers[index]?.cancel()
            timers[index] = nil
        }
        if responding != nil { logAccess(outcome: "connection_closed") }
        responding = nil
        if let writable {
            self.writable = nil
            writable.fail(ChannelError.ioOnClosedChannel)
        }
        endBody(failing: RequestBodyError.incomplete)
        collecting = nil
        pipelined.removeAll()
        upgrade.connectionEnded()
        raw = nil
    }

    // MARK: From the decoder

    /// A read arrived: the readable bytes of `buffer` after the first `reported`. True if
    /// they are parsed. Scanned for a newline only while a request line is measured.
    func bytesReceived(_ buffer: ByteBuffer, reported: Int) -> Bool {
        let count = buffer.readableBytes - reported
        var newline: Int?
        if machine.measuresRequestLine {
            newline = buffer.withUnsafeReadableBytes { $0[reported...].firstIndex(of: UInt8(ascii: "\n")) }.map { $0 - reported }
        }
        let now = clock.now
        let actions = machine.bytesReceived(count: count, newline: newline, now: now)
        var forward = false
        for action in actions {
            if case .forward = action { forward = true } else { perform(action) }
        }
        if forward { readInstant = now }
        return forward
    }

    /// The read was decoded; `unparsed` bytes stay in the decoder (it stops at an upgrade).
    func bytesProcessed(unparsed: Int) {
        let now = readNow
        readInstant = nil
        perform(machine.bytesProcessed(now: now))
        if unparsed > 0 { perform(machine.bytesHeld(unparsed)) }
    }

    /// The instant of the read being decoded, for the events the decoder yields from it
    /// (one clock read per read, not one per event); the clock's now outside a read.
    var readNow: ContinuousClock.Instant { readInstant ?? clock.now }

    /// A client frame arrived (``WebSocketMessageGuard``); false if it is refused (unmasked).
    func webSocketFrameReceived(masked: Bool) -> Bool {
        perform(machine.webSocketFrameReceived(masked: masked, now: clock.now))
        return masked
    }

    /// The socket stopped taking data, or takes it again, after the upgrade (from
    /// ``WebSocketMessageGuard``): the route's messages wait in their writer with no deadline
    /// of their own, so the write-stall time bounds how long the socket may take nothing.
    func webSocketWritabilityChanged(_ writable: Bool) {
        perform(writable ? machine.writeUnblocked(now: clock.now) : machine.writeBlocked(now: clock.now))
    }

    /// A WebSocket message broke a bound (``WebSocketMessageGuard``).
    func webSocketViolation(_ code: WebSocketErrorCode) {
        var buffer = ByteBuffer()
        buffer.write(webSocketErrorCode: code)
        perform(machine.webSocketViolation(code: buffer.readInteger(as: UInt16.self) ?? 1002, now: clock.now))
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Switching, the decoder yields nothing more (it stops at an upgrade); once it left,
        // the bytes it held and later reads come here raw, held until the frame handlers are in.
        if upgrade.phase != .none {
            holdDuringUpgrade(data)
            return
        }
        let part = unwrapInboundIn(data)
        let actions: Machine.Actions
        switch part {
        case .head(let head):
            receivedHead(head)
            return
        case .body(let buffer): actions = machine.bodyReceived(bytes: buffer.readableBytes, now: readNow)
        case .end: actions = machine.endReceived(now: readNow)
        }
        for action in actions {
            switch action {
            case .forward:
                switch part {
                case .body(let buffer): serve(.body(buffer))
                case .end:
                    serve(.end)
                case .head: break
                }
            case .hold:
                heldParts.append(part)
            case .switchToWebSocket:
                beginUpgrade()
            default:
                perform(action)
            }
        }
    }

    private func receivedHead(_ head: HTTPRequestHead) {
        // The decoder stops at a handshake, so no head comes while its route decides; the
        // handshake's own head and route stay where they are.
        if machine.isUpgrading { return }
        let route = configuration.routes.info(method: Self.method(head.method), path: Self.routePath(head.uri))
        pending = (head, route)
        perform(machine.headReceived(Self.facts(head), route: route, now: readNow))
    }

    /// The path a request target routes by: an origin-form target up to its query or
    /// fragment (the usual case, no parse); any other form as its URI's path.
    static func routePath(_ uri: String) -> Substring {
        let utf8 = uri.utf8
        if utf8.first == UInt8(ascii: "/") {
            // A byte scan: `?` and `#` are ASCII, so where one is found is a character boundary.
            return uri[..<(utf8.firstIndex { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? utf8.endIndex)]
        }
        return Substring(URI(uri).path)
    }

    /// The head's method as the route table keys it: the common ones without a string check.
    static func method(_ method: HTTPMethod) -> HTTPRequest.Method {
        switch method {
        case .GET: .get
        case .POST: .post
        case .PUT: .put
        case .DELETE: .delete
        case .HEAD: .head
        case .PATCH: .patch
        case .OPTIONS: .options
        default: HTTPRequest.Method(method.rawValue) ?? .get
        }
    }

    /// The head's facts the machine decides on.
    static func facts(_ head: HTTPRequestHead) -> RequestHeadFacts {
        var facts = RequestHeadFacts(isConnect: head.method == .CONNECT, keepAlive: head.isKeepAlive, uri: head.uri)
        facts.isHead = head.method == .HEAD
        let codings = head.headers[canonicalForm: "transfer-encoding"]
        if !codings.isEmpty {
            facts.transferCoding = codings.allSatisfy({ $0.lowercased() == "chunked" }) ? .chunked : .other(codings.joined(separator: ", "))
        }
        facts.declaredLength = head.headers.first(name: "content-length").flatMap { Int($0) }
        if let expect = head.headers.first(name: "expect") {
            facts.expectation = expect.lowercased() == "100-continue" ? .continue100 : .other
        }
        let upgrade = head.headers[canonicalForm: "upgrade"]
        if !upgrade.isEmpty {
            let connectionUpgrade = head.headers[canonicalForm: "connection"].contains { $0.lowercased() == "upgrade" }
            facts.decoderStops = connectionUpgrade
            let isWebSocket = head.method == .GET && connectionUpgrade && upgrade.contains { $0.lowercased() == "websocket" }
            if isWebSocket {
                let keys = head.headers["sec-websocket-key"]
                // RFC 6455 §4.1: the handshake is HTTP/1.1 or later (an HTTP/1.0 one gets
                // the 426, as the reference's).
                facts.upgrade = .webSocket(
                    versionOK: head.headers["sec-websocket-version"] == ["13"] && (head.version.major, head.version.minor) >= (1, 1),
                    keyOK: keys.count == 1 && Data(base64Encoded: keys[0].trimmingSpaces())?.count == 16)
            } else {
                facts.upgrade = .other
            }
        }
        return facts
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        connectionObserver?.errorCaught(error)
        if machine.isWebSocket { return }
        guard error is HTTPParserError || error is ByteToMessageDecoderError else {
            context.fireErrorCaught(error)
            return
        }
        let parseError: Machine.ParseError
        if let error = error as? HTTPParserError, error == .headerOverflow {
            parseError = .headerOverflow
        } else if let error = error as? HTTPParserError, error == .invalidEOFState {
            parseError = .endedEarly(Self.describe(error))
        } else {
            parseError = .other(Self.describe(error))
        }
        perform(machine.parseError(parseError, now: readNow))
    }

    /// A parse error in words, for an answer's `detail`.
    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as HTTPParserError: return error.debugDescription
        case let error as RequestBodyError: return error.description
        default: return "The request could not be parsed."
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent {
            perform(machine.quiesce(now: clock.now))
            return
        }
        if let event = event as? ChannelEvent, event == .inputClosed {
            connectionObserver?.inputClosed()
            perform(machine.inputEnded(now: clock.now))
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            perform(machine.writeUnblocked(now: clock.now))
            if let writable {
                self.writable = nil
                writable.succeed(())
            }
        } else {
            // Whatever waits to be written (a body, an answer, a WebSocket's messages, which
            // wait in their writer with no deadline of their own): the socket must take some
            // of it within the write-stall time, or the connection closes.
            perform(machine.writeBlocked(now: clock.now))
        }
        context.fireChannelWritabilityChanged()
    }

    // MARK: Outbound

    func read(context: ChannelHandlerContext) {
        if machine.readsPaused {
            readPending = true
        } else {
            context.read()
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        context.write(data, promise: promise)
    }
}
