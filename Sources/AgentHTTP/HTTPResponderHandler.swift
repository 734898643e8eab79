import AgentCore
import CoreMetrics
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// Serves a connection's HTTP/1 requests from the channel pipeline: each request's handler
/// runs as one task on the connection's event loop (``EventLoopTaskExecutor``), which calls
/// the router and writes the response straight to the channel.
///
/// Hummingbird serves a connection through `NIOAsyncChannel`: every request part crosses an
/// async sequence and every response part an async writer, each with its own state machine
/// and continuation; `agent-bench http` measured that path at 0.54× the requests per second
/// of a bare SwiftNIO server. Here a request costs one task.
///
/// One request at a time: pipelined requests wait here, reads stopped, until the current
/// response has ended (NIO's `HTTPServerPipelineHandler` does the same by stopping and
/// restarting reads around every response, which costs two `epoll_ctl` calls a request
/// even without pipelining). Bodies:
/// none (the common GET) is an empty body; a declared length up to ``collectLimit`` is
/// collected before the handler starts (a JSON command: no stream); anything else (chunked,
/// larger, uploads) streams with back pressure, reads pausing while the handler has
/// ``RequestBodyStream/highWatermark`` buffers unread. Responses: written as the body
/// writes them; a short body of known length goes out with its head in one flush, any
/// other body flushes each write and waits while the channel is not writable.
///
/// Used only on the connection's event loop.
final class HTTPResponderHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// What the handler needs from the server, shared by every connection.
    final class Configuration: Sendable {
        let responder: AgentResponder
        let serverName: String?
        let logger: Logger
        /// A body write that waits this long for the socket to take data closes the
        /// connection (``AgentHTTPLimits/responseWriteStallTimeout``).
        let writeStallTimeout: TimeAmount
        /// One line per request at info (``AccessLog``).
        let accessLog: AccessLog

        init(
            responder: AgentResponder, serverName: String?, logger: Logger,
            writeStallTimeout: TimeAmount = .init(AgentHTTPLimits.responseWriteStallTimeout), accessLog: Bool = true
        ) {
            self.responder = responder
            self.serverName = serverName
            self.logger = logger
            self.writeStallTimeout = writeStallTimeout
            self.accessLog = AccessLog(logger: logger, enabled: accessLog)
        }
    }

    /// Bodies declared up to this length are collected before the handler runs.
    static let collectLimit = 64 * 1024
    /// A response body of known length up to this goes out in one flush with its head.
    static let singleFlushLimit = 64 * 1024

    private let configuration: Configuration
    /// Where the connection came from (every request's context carries it).
    private let origin: ConnectionOrigin
    /// The first request follows a refused WebSocket handshake: answered 400, then closed.
    private let refuseFirstRequest: Bool
    private var context: ChannelHandlerContext?
    private var executor: EventLoopTaskExecutor?
    private var date = HTTPDate()
    /// The route context every request of this connection starts from (made at its first).
    private var connectionContext: AgentRequestContext?

    /// A handler task is running (its response has not ended).
    private var responding = false
    /// Numbers the exchanges: a task's late call cannot end the next request's response
    /// (a pipelined request starts as soon as the last `.end` is written).
    private var exchange: UInt64 = 0
    /// The current request's `.end` has arrived.
    private var requestEnded = true
    /// The connection closes once the current response has ended.
    private var closeAfterResponse = false
    /// A close is under way: nothing more is served; input is read and dropped until the
    /// client closes or the linger time passes (closing at once with input unread would
    /// reset the connection, and the client could lose the last response).
    private var closing = false
    /// The connection's first handler, which shuts our side after the pending writes.
    private var connectionGuard: ConnectionGuard?
    /// Tells waiting requests when the client has gone (given to their contexts).
    private var connectionObserver: ConnectionObserver?
    /// Most request parts that may wait behind a running request (pipelining); beyond it
    /// the connection closes. Reads stop while any wait, but a half-close makes NIO read
    /// what the socket holds.
    static let maxPipelinedParts = 256
    /// A small body being collected: the request's head and the bytes so far.
    private var collecting: (head: HTTPRequestHead, declared: Int, body: ByteBuffer)?
    /// The streamed body's producer, while the handler may still read it.
    private var bodyStream: RequestBodyStream.Source?
    /// Reads are held while the streamed body's consumer has enough buffered, and while
    /// pipelined requests wait.
    private var bodyPaused = false
    private var pipelinePaused = false
    private var readPending = false
    /// Request parts that arrived behind a request still being answered (pipelining):
    /// at most what one read decoded into, since reads stop while any wait.
    private var pipelined = CircularBuffer<HTTPServerRequestPart>()
    private var draining = false
    /// The client half-closed behind pipelined requests: acted on once they are served.
    private var inputClosedAfterPipelined = false
    /// Waiters for the channel to become writable again (at most one: one response at a time).
    private var writable: EventLoopPromise<Void>?
    /// The current request's access-log line, while the access log is on.
    private var access: AccessLog.Entry?

    init(configuration: Configuration, origin: ConnectionOrigin = .http, refuseFirstRequest: Bool = false) {
        self.configuration = configuration
        self.origin = origin
        self.refuseFirstRequest = refuseFirstRequest
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        executor = EventLoopTaskExecutor(context.eventLoop)
        connectionGuard = try? context.pipeline.syncOperations.handler(type: ConnectionGuard.self)
        connectionObserver = try? context.pipeline.syncOperations.handler(type: ConnectionObserver.self)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        connectionEnded()
        self.context = nil
        connectionContext = nil
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if closing { return }
        let part = unwrapInboundIn(data)
        // A pipelined request waits, with everything after it, until the current response
        // has ended; reads stop meanwhile, so normally at most one read's worth waits.
        if !pipelined.isEmpty || (responding && part.isHead) {
            guard pipelined.count < Self.maxPipelinedParts else {
                context.close(promise: nil)
                return
            }
            pipelined.append(part)
            pipelinePaused = true
            return
        }
        handle(part, context: context)
    }

    private func handle(_ part: HTTPServerRequestPart, context: ChannelHandlerContext) {
        switch part {
        case .head(var head):
            requestEnded = false
            exchange &+= 1
            if head.headers.contains(name: ContinueMark.headerName) {
                head.headers.remove(name: ContinueMark.headerName)
                connectionGuard?.sendContinue()
            }
            if !head.isKeepAlive { closeAfterResponse = true }
            if refuseFirstRequest {
                refuse(context)
                return
            }
            let declared = head.headers.first(name: "content-length").flatMap { Int($0) }
            let chunked = head.headers.contains(name: "transfer-encoding")
            if !chunked && (declared ?? 0) == 0 {
                start(head, body: RequestBody(buffer: ByteBuffer()), context: context)
            } else if !chunked, let declared, declared <= Self.collectLimit {
                // The buffer is made when the body starts arriving (a head alone costs nothing).
                collecting = (head, declared, ByteBuffer())
            } else {
                let (body, source) = RequestBodyStream.make(handler: NIOLoopBound(self, eventLoop: context.eventLoop), exchange: exchange)
                bodyStream = source
                start(head, body: RequestBody(asyncSequence: body), context: context)
            }
        case .body(var buffer):
            if collecting != nil {
                if collecting!.body.capacity == 0 { collecting!.body.reserveCapacity(collecting!.declared) }
                collecting!.body.writeBuffer(&buffer)
            } else if let bodyStream {
                if bodyStream.yield(buffer) == .stopProducing { bodyPaused = true }
            }
            // Otherwise the handler has answered without reading it all: dropped.
        case .end:
            requestEnded = true
            if let (head, _, body) = collecting {
                collecting = nil
                start(head, body: RequestBody(buffer: body), context: context)
            } else if endBody() {
                resumeReads(context)
            }
            // Answered early, and shutdown (or a close) came meanwhile: nothing left to wait for.
            if closeAfterResponse, !responding { closeGracefully(context) }
        }
    }

    /// Passes on pipelined parts now that the current response has ended, up to the next
    /// request that must wait in turn; reading resumes once none is left.
    private func drainPipelined(_ context: ChannelHandlerContext) {
        guard !draining else { return }
        draining = true
        defer { draining = false }
        while !closing, let next = pipelined.first, !(responding && next.isHead) {
            pipelined.removeFirst()
            handle(next, context: context)
        }
        if pipelined.isEmpty {
            pipelinePaused = false
            if inputClosedAfterPipelined {
                inputClosedAfterPipelined = false
                inputEnded(context)
            }
            resumeReads(context)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        connectionEnded()
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, let writable {
            self.writable = nil
            writable.succeed(())
        }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent {
            // Shutdown: finish the current exchange, then close (pipelined requests that
            // have not started are dropped; the response says `Connection: close`).
            if responding || !requestEnded {
                closeAfterResponse = true
            } else {
                context.close(promise: nil)
            }
            return
        }
        if let event = event as? ChannelEvent, event == .inputClosed {
            // The client sent its last byte. A request still arriving never will: its
            // streamed body fails, a collected one is dropped. A response in progress is
            // still written, then the connection closes. Pipelined requests are served first.
            if pipelined.isEmpty {
                inputEnded(context)
            } else {
                inputClosedAfterPipelined = true
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A parse error inside a request (the guard answers those between requests): the
        // body's reader fails with it, the route answers 400, and the connection closes
        // (nothing after broken framing can be read).
        inputEnded(context, failing: RequestBodyError.malformed(HTTPRequestGuard.describe(error)))
        context.fireErrorCaught(error)
    }

    private func inputEnded(_ context: ChannelHandlerContext, failing error: RequestBodyError = .incomplete) {
        collecting = nil
        endBody(failing: error)
        if responding {
            closeAfterResponse = true
        } else {
            context.close(promise: nil)
        }
    }

    // MARK: Outbound

    func read(context: ChannelHandlerContext) {
        if bodyPaused || pipelinePaused {
            readPending = true
        } else {
            context.read()
        }
    }

    // MARK: Request body back pressure (from RequestBodyStream, on the loop)

    /// The handler drained its buffered body parts: reading may go on.
    func bodyWantsMore(exchange current: UInt64) {
        guard current == exchange, let context else { return }
        bodyPaused = false
        resumeReads(context)
    }

    /// The body's reader has gone (finished, returned, or dropped its iterator): the rest
    /// is dropped as it arrives.
    func bodyAbandoned(exchange current: UInt64) {
        guard current == exchange, let context else { return }
        bodyStream = nil
        bodyPaused = false
        resumeReads(context)
    }

    private func resumeReads(_ context: ChannelHandlerContext) {
        if readPending, !bodyPaused, !pipelinePaused {
            readPending = false
            context.read()
        }
    }

    // MARK: Serving

    /// Starts the handler task for one request.
    private func start(_ head: HTTPRequestHead, body: RequestBody, context: ChannelHandlerContext) {
        guard let converted = try? HTTPRequest(agentHead: head) else {
            refuse(context)
            return
        }
        let request = Request(head: converted, body: body)
        if configuration.accessLog.isOn { access = AccessLog.Entry(method: head.method.rawValue, uri: head.uri) }
        responding = true
        Self.spawn(
            request, context: requestContext(context.channel), exchange: exchange, responder: configuration.responder,
            handler: LoopBoundHandler(self, executor: executor!))
    }

    /// The route context for the next request: a copy of the connection's (its storage is
    /// made once: Hummingbird's allocates a locked box for the endpoint path), or a new one
    /// carrying a request id when debug logging is on.
    private func requestContext(_ channel: any Channel) -> AgentRequestContext {
        var logger = configuration.logger
        let perRequest = logger.logLevel <= .debug
        if perRequest {
            logger[metadataKey: "hb.request.id"] = .stringConvertible(RequestID())
        } else if let connectionContext {
            return connectionContext
        }
        var made = AgentRequestContext(source: .init(channel: channel, logger: logger), origin: origin)
        made.connectionObserver = connectionObserver
        if !perRequest { connectionContext = made }
        return made
    }

    /// Starts the handler task (apart from `self`, which only the loop may touch).
    private static func spawn(
        _ request: Request, context: AgentRequestContext, exchange: UInt64, responder: AgentResponder, handler: LoopBoundHandler
    ) {
        // Started on this thread (the loop's) at once: the router and a handler that does
        // not suspend answer before this read's processing returns, without a trip through
        // the loop's task queue. After a suspension the task resumes on the loop (its
        // preferred executor).
        Task.immediate(executorPreference: handler.executor) {
            let response = await responder.respond(to: request, context: context)
            await handler.value.write(response, exchange: exchange)
        }
    }

    /// The NIO head of `response` with the server's own fields (Date, Server, Connection:
    /// close) replacing any the route set, built in one array of the final size (NIO's
    /// conversion and `replaceOrAdd` allocated three times per response).
    private func nioHead(_ response: Response) -> HTTPResponseHead {
        let serverName = configuration.serverName
        var fields: [(String, String)] = []
        fields.reserveCapacity(response.headers.count + 3)
        for field in response.headers {
            if field.name == .date || (serverName != nil && field.name == .server) || (closeAfterResponse && field.name == .connection) {
                continue
            }
            fields.append((field.name.rawName, field.value))
        }
        fields.append(("Date", date.now()))
        if let serverName { fields.append(("Server", serverName)) }
        if closeAfterResponse { fields.append(("Connection", "close")) }
        return HTTPResponseHead(
            version: .http1_1,
            status: HTTPResponseStatus(statusCode: response.status.code, reasonPhrase: response.status.reasonPhrase),
            headers: HTTPHeaders(fields))
    }

    /// Writes `response` (head, body as its writer produces it, end), then finishes the
    /// exchange. Runs in the handler task, on the loop.
    nonisolated(nonsending) private func write(_ response: Response, exchange current: UInt64) async {
        guard let context, current == exchange, responding else { return }
        access?.status = Int(response.status.code)
        let flushEachWrite = (response.body.contentLength ?? .max) > Self.singleFlushLimit
        // From the response's status and fields (its `head` builds an HTTPResponse: an allocation).
        context.write(wrapOutboundOut(.head(nioHead(response))), promise: nil)
        let writer = ChannelBodyWriter(
            handler: LoopBoundHandler(self, executor: executor!), exchange: current, flushEachWrite: flushEachWrite)
        do {
            try await response.body.write(writer)
        } catch {
            // A body that failed half-way cannot be answered any more: the client sees the
            // connection end before the declared length or the final chunk.
            configuration.logger.debug("response body failed", metadata: ["error": "\(error)"])
            if current == exchange, responding {
                logAccess(outcome: "body_failed")
                responding = false
                self.context?.close(promise: nil)
            }
            return
        }
        // A body that never called `finish` still ends its response.
        finishResponse(exchange: current, trailers: nil)
    }

    /// Writes one body part (from ``ChannelBodyWriter``, on the loop); waits while the channel
    /// is not writable.
    nonisolated(nonsending) func writeBody(_ buffer: ByteBuffer, exchange current: UInt64, flush: Bool) async throws {
        guard let context, context.channel.isActive, current == exchange, responding else { throw ChannelError.ioOnClosedChannel }
        if !context.channel.isWritable {
            // The promise is in place before the flush, which may report writability
            // synchronously.
            let promise = context.eventLoop.makePromise(of: Void.self)
            writable = promise
            // No progress (the client reads nothing) for the stall time: the connection
            // closes, which fails this wait and ends the response.
            let channel = context.channel
            let timeout = configuration.writeStallTimeout
            let logger = configuration.logger
            let stall = context.eventLoop.scheduleTask(in: timeout) {
                HTTPMetrics.closed("write_stall").increment()
                logger.info("closed a connection whose client stopped reading its response", metadata: ["after": "\(timeout)"])
                channel.close(promise: nil)
            }
            promise.futureResult.whenComplete { _ in stall.cancel() }
            context.flush()
            if context.channel.isWritable, let waiting = writable {
                writable = nil
                waiting.succeed(())
            }
            try await promise.futureResult.get()
            context.eventLoop.assertInEventLoop()
        }
        guard let context = self.context, current == exchange, responding else { throw ChannelError.ioOnClosedChannel }
        access?.bytes += buffer.readableBytes
        if flush {
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        } else {
            context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        }
    }

    /// Ends the response (once) and the exchange: the next request may start, or the
    /// connection closes when it must.
    func finishResponse(exchange current: UInt64, trailers: HTTPFields?) {
        guard current == exchange, responding, let context else { return }
        logAccess()
        responding = false
        // A body the handler left unread is dropped as it arrives (reads go on, so the
        // request can end and the next one start).
        if endBody() { resumeReads(context) }
        let end = HTTPServerResponsePart.end(trailers.map { HTTPHeaders($0) })
        if closeAfterResponse {
            context.write(wrapOutboundOut(end), promise: nil)
            closeGracefully(context)
        } else {
            context.writeAndFlush(wrapOutboundOut(end), promise: nil)
            if !pipelined.isEmpty { drainPipelined(context) }
        }
    }

    /// Writes the current request's access-log line, once.
    private func logAccess(outcome: String? = nil) {
        guard let entry = access else { return }
        access = nil
        configuration.accessLog.record(entry, listener: origin.listener, outcome: outcome)
    }

    /// Ends the connection once everything written is out: our side first (the client
    /// reads every response, then EOF), the rest when the client closes or after
    /// ``ConnectionGuard/lingerTimeout``. Nothing more is served meanwhile; what arrives is
    /// dropped.
    private func closeGracefully(_ context: ChannelHandlerContext) {
        guard !closing else { return }
        closing = true
        pipelined.removeAll()
        pipelinePaused = false
        collecting = nil
        endBody(failing: ChannelError.outputClosed)
        bodyPaused = false
        resumeReads(context)
        if let connectionGuard {
            connectionGuard.closeGracefullyAfterPendingWrites()
        } else {
            context.close(promise: nil)
        }
    }

    /// Answers 400 and closes: a request head that is not valid HTTP semantics, or the
    /// first request after a WebSocket handshake the route refused.
    private func refuse(_ context: ChannelHandlerContext) {
        closeAfterResponse = true
        responding = true
        var headers = HTTPHeaders()
        headers.add(name: "connection", value: "close")
        headers.add(name: "content-length", value: "0")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .badRequest, headers: headers))), promise: nil)
        finishResponse(exchange: exchange, trailers: nil)
    }

    /// The connection closed or the handler left: a waiting writer and a body reader learn
    /// it at once.
    private func connectionEnded() {
        if responding { logAccess(outcome: "connection_closed") }
        if let writable {
            self.writable = nil
            writable.fail(ChannelError.ioOnClosedChannel)
        }
        endBody(failing: RequestBodyError.incomplete)
        collecting = nil
        pipelined.removeAll()
    }

    /// Ends the streamed body, if one is open (its reader sees the end, or `error`); reads
    /// are no longer held for it. True if there was one.
    @discardableResult
    private func endBody(failing error: (any Error)? = nil) -> Bool {
        guard let bodyStream else { return false }
        self.bodyStream = nil
        if let error { bodyStream.finish(error) } else { bodyStream.finish() }
        bodyPaused = false
        return true
    }
}

extension HTTPServerRequestPart {
    var isHead: Bool {
        if case .head = self { return true }
        return false
    }
}
