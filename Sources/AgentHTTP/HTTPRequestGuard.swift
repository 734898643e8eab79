import AgentCore
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import HTTPTypes
import NIOCore
import NIOHTTP1

/// Sits right after the HTTP/1 decoder of every connection and enforces what Hummingbird
/// and NIO leave open:
///
/// - **Head deadline**: a complete request head must arrive within ``Limits/headTimeout``
///   of the connection's accept or of the end of the previous exchange; otherwise the
///   connection closes (with 408 if part of a head arrived).
/// - **`Upgrade`**: ignored on routes that are not WebSocket routes (RFC 9110 §7.8), so an
///   h2c upgrade or `Upgrade: foo` gets the route's normal answer. On WebSocket routes a
///   handshake with a wrong version or a malformed key, or one the route refuses, is
///   answered by the route's plain-HTTP twin (426 with `Sec-WebSocket-Version: 13`, 400,
///   or the route's JSON error). A handshake that is not the connection's first request
///   (only the first can upgrade) gets 307 to the same URI and the connection closes, so
///   the client retries on a new one.
/// - **`Expect`**: `100-continue` is answered with `100 Continue` (by the responder when it
///   takes the request up, so never ahead of an earlier pipelined response nor for a
///   request it will not serve), or with 413 when the declared length is over the body
///   limit; any other expectation gets 417.
/// - A declared `Content-Length` over the body limit is refused with 413 before any body is
///   read. `CONNECT` gets 405. Malformed HTTP gets 400, an oversized request line 414 and
///   oversized headers 431; each closes the connection. A refusal for a request pipelined
///   behind responses still being written waits until they have ended.
/// - Graceful shutdown closes the connection at once if no request is in progress.
///
/// - A WebSocket route with an async `prepare` (starting a desktop): the handshake is held
///   while it runs, then let through, or turned into a plain request whose twin answers
///   with the JSON error (Hummingbird can only answer a refused upgrade with an empty 400).
///
/// Leaves the pipeline once a WebSocket handshake it let through is complete. Event-loop
/// only.
final class HTTPRequestGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    struct Limits: Sendable {
        /// Time allowed for a complete request head.
        var headTimeout: TimeAmount = .seconds(10)
        /// Time allowed from a request's head to the end of its body (1 MiB on loopback
        /// takes milliseconds; a client trickling a body cannot hold a connection busy).
        var bodyTimeout: TimeAmount = .seconds(60)
        /// Largest declared body accepted.
        var maxBody: Int = AgentHTTPLimits.maxRequestBody
        /// Paths (no query) whose bodies are streamed by their handler: no size cap, and
        /// the body deadline is an idle one (no byte for `bodyTimeout`), so a large upload
        /// may take as long as it keeps moving.
        var streamingPaths: Set<String> = []
        /// A silent WebSocket peer is pinged after this, and closed after as long again
        /// (``ConnectionGuard``).
        var webSocketPingInterval: TimeAmount = .init(AgentHTTPLimits.webSocketPingInterval)
    }

    private let connection: ConnectionGuard
    private let webSocketRoutes: WebSocketRouteTable
    private let limits: Limits
    /// Made in `handlerAdded` (they need the event loop); cancelled in `handlerRemoved`.
    private var headTimer: LazyTimer?
    private var bodyTimer: LazyTimer?
    /// A request head was received and its `.end` not yet.
    private var requestOpen = false
    /// Requests passed on whose response has not ended: while any is, the connection is
    /// busy (a `wait=true` handler may run for minutes) and no head deadline runs.
    private var awaitingResponse = 0
    /// The current request is a WebSocket handshake let through to the upgrade handler.
    private var webSocketHandshake = false
    /// The current request was answered here: drop its parts.
    private var swallowing = false
    /// The connection became a WebSocket: everything passes through.
    private var upgraded = false
    /// The current request's body is streamed by its handler (``Limits/streamingPaths``).
    private var streamingBody = false
    /// A handshake whose route must `prepare` first (set by `filterUpgrade`).
    private var pendingPrepare: (prepare: AgentWebSocketRoute.Prepare, request: WebSocketRouteRequest)?
    /// The held handshake and the parts that arrived after it (a GET: its `.end`; more than
    /// ``maxHeldParts`` closes the connection).
    private var held: (head: HTTPRequestHead, parts: [HTTPServerRequestPart])?
    /// Request heads seen on this connection: only the first can be a WebSocket handshake
    /// (NIO's upgrade handler leaves after the first request).
    private var requestCount = 0
    /// A refusal for a request that arrived while earlier responses were still being
    /// written: sent once they have ended (an answer written ahead of the codec would
    /// otherwise overtake them); everything after the refused request is dropped.
    private var deferredRefusal: Refusal?
    /// A response written on this connection said it closes the connection.
    private var responseCloses = false
    private static let maxHeldParts = 8
    private var removed = false

    init(connection: ConnectionGuard, webSocketRoutes: WebSocketRouteTable, limits: Limits) {
        self.connection = connection
        self.webSocketRoutes = webSocketRoutes
        self.limits = limits
    }

    func handlerAdded(context: ChannelHandlerContext) {
        armHeadTimer(context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        removed = true
        headTimer?.cancel()
        bodyTimer?.cancel()
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // A refused request waits for the responses before it; nothing after it is served.
        if deferredRefusal != nil { return }
        if upgraded {
            context.fireChannelRead(data)
            return
        }
        if held != nil {
            held!.parts.append(unwrapInboundIn(data))
            if held!.parts.count > Self.maxHeldParts { context.close(promise: nil) }
            return
        }
        switch unwrapInboundIn(data) {
        case .head(var head):
            headTimer?.disarm()
            requestOpen = true
            requestCount += 1
            connection.setPhase(.busy)
            streamingBody = limits.streamingPaths.contains(String(head.uri.prefix { $0 != "?" }))
            let codings = head.headers[canonicalForm: "transfer-encoding"]
            if !codings.isEmpty, codings.allSatisfy({ $0.lowercased() == "chunked" }) { connection.chunkedBodyBegins() }
            if let refusal = refusal(for: &head) {
                swallowing = true
                if awaitingResponse == 0 {
                    connection.respondAndClose(refusal.status, refusal.body, headers: refusal.headers)
                } else {
                    deferredRefusal = refusal
                }
                return
            }
            if let (prepare, request) = pendingPrepare {
                pendingPrepare = nil
                held = (head, [])
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                Task {
                    let admitted: Bool
                    do {
                        try await prepare(request)
                        admitted = true
                    } catch {
                        admitted = false
                    }
                    bound.eventLoop.execute {
                        let (handler, context) = bound.value
                        handler.finishAdmission(context: context, admitted: admitted)
                    }
                }
                return
            }
            pass(head, context: context)
        case .body(let part):
            connection.chunkedBodyData(part.readableBytes)
            if streamingBody, bodyTimer?.isArmed == true { armBodyTimer(context) }
            if !swallowing { context.fireChannelRead(data) }
        case .end:
            ended(context: context, data: data)
        }
    }

    /// Lets a request head through (the handshake is now up to the upgrade handler).
    private func pass(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        awaitingResponse += 1
        if !webSocketHandshake { connection.stopCopyingHead() }
        armBodyTimer(context)
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }

    /// The route's `prepare` finished: the handshake goes on, or becomes a plain request
    /// for the twin route; then the parts held meanwhile follow.
    private func finishAdmission(context: ChannelHandlerContext, admitted: Bool) {
        guard !removed, context.channel.isActive, let (held, parts) = held else { return }
        self.held = nil
        var head = held
        webSocketHandshake = admitted
        if !admitted {
            Self.stripUpgrade(&head)
            connection.releaseWebSocketSlot()
        }
        pass(head, context: context)
        for part in parts where !upgraded {
            channelRead(context: context, data: wrapInboundOut(part))
        }
    }

    private func ended(context: ChannelHandlerContext, data: NIOAny) {
        requestOpen = false
        connection.chunkedBodyEnds()
        bodyTimer?.disarm()
        if swallowing { return }
        if webSocketHandshake {
            // NIO's upgrade handler removes the HTTP decoder before it writes the 101,
            // and the decoder then passes leftover bytes on raw: from here on nothing
            // here may expect HTTP parts. The byte guard takes over (frame masking).
            upgraded = true
            headTimer?.cancel()
            context.fireChannelRead(data)
            connection.switchToWebSocket()
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            return
        }
        connection.requestEnded()
        context.fireChannelRead(data)
        idleIfDone(context)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A parse error inside the request being served (its body) fails that request's
        // handler: the responder closes. One in a later, pipelined request is answered
        // like any refusal, after the responses before it.
        // With a refusal waiting, the decoder reports every later read as an error
        // (`dataReceivedInErrorState`): that input is dropped, like anything after a refusal.
        if deferredRefusal != nil, error is HTTPParserError || error is ByteToMessageDecoderError { return }
        guard !upgraded, let parseError = error as? HTTPParserError, awaitingResponse == 0 || !requestOpen else {
            context.fireErrorCaught(error)
            return
        }
        swallowing = true
        headTimer?.disarm()
        let refusal = Self.refusal(for: parseError, requestLineTooLong: connection.requestLineExceeds(AgentHTTPLimits.maxHeaderFieldSize))
        if awaitingResponse == 0 {
            connection.respondAndClose(refusal.status, refusal.body)
        } else {
            deferredRefusal = refusal
        }
    }

    /// The answer to a request the decoder could not parse: 414, 431 or 400.
    private static func refusal(for parseError: HTTPParserError, requestLineTooLong: Bool) -> Refusal {
        switch parseError {
        case .headerOverflow where requestLineTooLong:
            return Refusal(
                status: .uriTooLong,
                body: APIErrorBody(message: "Request line too long.", detail: "The limit is \(AgentHTTPLimits.maxHeaderFieldSize) bytes."))
        case .headerOverflow:
            return Refusal(
                status: .requestHeaderFieldsTooLarge,
                body: APIErrorBody(
                    message: "Request header fields too large.",
                    detail: "The limits are \(AgentHTTPLimits.maxHeaderFieldSize) bytes a field, \(AgentHTTPLimits.maxHeaderListSize) bytes in all and \(AgentHTTPLimits.maxHeaderFieldCount) fields."))
        default:
            return Refusal(status: .badRequest, body: APIErrorBody(message: "Malformed HTTP request.", detail: describe(parseError)))
        }
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
        if event is ChannelShouldQuiesceEvent, !upgraded, !requestOpen, awaitingResponse == 0 {
            // Nothing in progress: Hummingbird's own handler may not be installed yet
            // (before the first request), so close here.
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    // MARK: Outbound

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if upgraded {
            context.write(data, promise: promise)
            return
        }
        switch unwrapOutboundIn(data) {
        case .head(let head) where head.status == .switchingProtocols:
            // From here on the connection carries WebSocket frames, which pass through
            // untouched. (Removing this handler from inside the write loses its flush.)
            upgraded = true
            headTimer?.cancel()
            connection.switchToWebSocket()
            context.write(data, promise: promise)
        case .head(let head):
            // A response that closes the connection (HTTP/1.0, `Connection: close`, a
            // half-closed client, shutdown) is the last: nothing may follow it, not even a
            // waiting refusal (after an unframed HTTP/1.0 body it would read as body bytes).
            if head.headers.contains(name: "connection"), !head.isKeepAlive { responseCloses = true }
            context.write(data, promise: promise)
        case .body:
            context.write(data, promise: promise)
        case .end:
            awaitingResponse = max(0, awaitingResponse - 1)
            if responseCloses { deferredRefusal = nil }
            if awaitingResponse == 0, let refusal = deferredRefusal {
                deferredRefusal = nil
                context.write(data, promise: promise)
                connection.respondAndClose(refusal.status, refusal.body, headers: refusal.headers)
                return
            }
            context.write(data, promise: promise)
            idleIfDone(context)
        }
    }

    // MARK: Helpers

    private func idleIfDone(_ context: ChannelHandlerContext) {
        guard !requestOpen, awaitingResponse == 0, headTimer?.isArmed != true else { return }
        connection.setPhase(.awaitingHead(since: .now()))
        armHeadTimer(context)
    }

    private func armHeadTimer(_ context: ChannelHandlerContext) {
        if headTimer == nil {
            headTimer = LazyTimer(loop: context.eventLoop) { [connection, limits] in
                if connection.bytesSinceRequestStart > 0 {
                    connection.respondAndClose(
                        .requestTimeout,
                        APIErrorBody(message: "Request timeout.", detail: "No complete request head within \(limits.headTimeout.nanoseconds / 1_000_000_000) s."))
                } else {
                    connection.close()
                }
            }
        }
        headTimer!.arm(in: limits.headTimeout)
    }

    private func armBodyTimer(_ context: ChannelHandlerContext) {
        if bodyTimer == nil {
            bodyTimer = LazyTimer(loop: context.eventLoop) { [connection, limits] in
                connection.respondAndClose(
                    .requestTimeout,
                    APIErrorBody(message: "Request timeout.", detail: "The request body did not arrive within \(limits.bodyTimeout.nanoseconds / 1_000_000_000) s."))
            }
        }
        bodyTimer!.arm(in: limits.bodyTimeout)
    }

    private struct Refusal {
        var status: HTTPResponse.Status
        var body: APIErrorBody
        var headers: [(String, String)] = []
    }

    /// Refuses what the server must answer itself, and rewrites `Upgrade` handling; nil
    /// lets the request through.
    private func refusal(for head: inout HTTPRequestHead) -> Refusal? {
        // Marks only the guard may set (checked first: a removal copies the head's fields,
        // which the decoder still shares, even when there is nothing to remove).
        if head.headers.contains(name: WebSocketRefusal.headerName) { head.headers.remove(name: WebSocketRefusal.headerName) }
        if head.headers.contains(name: ContinueMark.headerName) { head.headers.remove(name: ContinueMark.headerName) }
        webSocketHandshake = false
        pendingPrepare = nil
        if head.method == .CONNECT {
            return Refusal(
                status: .methodNotAllowed, body: APIErrorBody(message: "Method not allowed.", detail: "CONNECT is not supported."),
                headers: [("Allow", "GET, POST")])
        }
        let codings = head.headers[canonicalForm: "transfer-encoding"]
        if !codings.isEmpty, !codings.allSatisfy({ $0.lowercased() == "chunked" }) {
            // RFC 9112 §6.1: a transfer coding the server does not know is answered 501; the
            // body cannot be framed, so the connection closes.
            return Refusal(
                status: .notImplemented,
                body: APIErrorBody(
                    message: "Transfer coding not supported.",
                    detail: "Only Transfer-Encoding: chunked is accepted; got \"\(codings.joined(separator: ", "))\"."))
        }
        let declared = head.headers.first(name: "content-length").flatMap { Int($0) }
        if let expect = head.headers.first(name: "expect") {
            guard expect.lowercased() == "100-continue" else {
                return Refusal(
                    status: .expectationFailed,
                    body: APIErrorBody(message: "Expectation failed.", detail: "Only \"100-continue\" is supported."))
            }
            head.headers.remove(name: "expect")
            if let declared, declared > limits.maxBody, !streamingBody { return tooLarge }
            if let refusal = filterUpgrade(&head) { return refusal }
            // Admitted: the responder sends `100 Continue` when it takes the request up
            // (after any response before it, never for a request it will not serve).
            head.headers.add(name: ContinueMark.headerName, value: "1")
            return nil
        } else if let declared, declared > limits.maxBody, !streamingBody {
            return tooLarge
        }
        return filterUpgrade(&head)
    }

    private var tooLarge: Refusal {
        Refusal(status: .contentTooLarge, body: APIError.bodyTooLarge.body)
    }

    /// Leaves a well-formed WebSocket handshake to a WebSocket route that admits it for the
    /// upgrade handler; turns every other `Upgrade` into a plain request.
    private func filterUpgrade(_ head: inout HTTPRequestHead) -> Refusal? {
        let upgrade = head.headers[canonicalForm: "upgrade"]
        guard !upgrade.isEmpty else { return nil }
        let isWebSocket = head.method == .GET
            && upgrade.contains { $0.lowercased() == "websocket" }
            && head.headers[canonicalForm: "connection"].contains { $0.lowercased() == "upgrade" }
        let path = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        if isWebSocket, let (route, parameters) = webSocketRoutes.match(path) {
            if requestCount > 1 {
                // Too late on this connection: the client is sent to a new one (as
                // Hummingbird answers it).
                return Refusal(
                    status: .temporaryRedirect,
                    body: APIErrorBody(message: "Upgrade on a new connection.", detail: "A WebSocket handshake must be a connection's first request."),
                    headers: [("Location", String(head.uri))])
            }
            let versions = head.headers["sec-websocket-version"]
            let keys = head.headers["sec-websocket-key"]
            if versions != ["13"] {
                Self.stripUpgrade(&head)
                head.headers.add(name: WebSocketRefusal.headerName, value: WebSocketRefusal.badVersion)
            } else if keys.count != 1 || Data(base64Encoded: keys[0].trimmingSpaces())?.count != 16 {
                Self.stripUpgrade(&head)
                head.headers.add(name: WebSocketRefusal.headerName, value: WebSocketRefusal.badKey)
            } else {
                do {
                    let request = WebSocketRouteRequest(headers: HTTPFields(head.headers), parameters: parameters)
                    try route.check(request)
                    // WebSockets have their own budget, beside the connection cap.
                    guard connection.reserveWebSocketSlot() else {
                        return Refusal(
                            status: .serviceUnavailable,
                            body: APIErrorBody(
                                message: "Too many WebSocket connections.",
                                detail: "At most \(connection.maxWebSockets) WebSockets may be open at once; try again when one has closed."),
                            headers: [("Retry-After", "1")])
                    }
                    if let prepare = route.prepare {
                        pendingPrepare = (prepare, request)
                    } else {
                        webSocketHandshake = true
                    }
                } catch {
                    // The twin route runs the same check and answers with its JSON error.
                    Self.stripUpgrade(&head)
                }
            }
            return nil
        }
        Self.stripUpgrade(&head)
        return nil
    }

    private static func stripUpgrade(_ head: inout HTTPRequestHead) {
        head.headers.remove(name: "upgrade")
        head.headers.remove(name: "http2-settings")
        let connection = head.headers[canonicalForm: "connection"].filter {
            let token = $0.lowercased()
            return token != "upgrade" && token != "http2-settings"
        }
        head.headers.remove(name: "connection")
        if !connection.isEmpty { head.headers.add(name: "connection", value: connection.joined(separator: ", ")) }
    }
}

extension HTTPFields {
    /// The same fields as NIO's `HTTPHeaders` (names that are not valid tokens are dropped).
    init(_ headers: HTTPHeaders) {
        self.init()
        for (name, value) in headers {
            if let field = HTTPField.Name(name) { append(HTTPField(name: field, value: value)) }
        }
    }
}

/// Marks a request head whose client waits for `100 Continue`: the guard admits it, the
/// responder answers `100 Continue` when it takes the request up.
enum ContinueMark {
    static let headerName = "x-workspace-agent-continue"
}
