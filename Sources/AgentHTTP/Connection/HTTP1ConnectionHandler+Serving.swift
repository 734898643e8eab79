import AgentCore
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// Serving requests: one route task per request, its body, the requests pipelined behind
/// it, and the response's write path.
extension HTTP1ConnectionHandler {
    /// A part let through by the machine: served now, or queued behind the running request
    /// (pipelining; the machine bounds the queue and has stopped reads meanwhile).
    func serve(_ part: ServedPart) {
        guard let context else { return }
        if !pipelined.isEmpty || (responding != nil && part.isHead) {
            pipelined.append(part)
            return
        }
        handle(part, context: context)
    }

    private func handle(_ part: ServedPart, context: ChannelHandlerContext) {
        switch part {
        case .head(let served):
            exchange &+= 1
            switch served.body {
            case .empty:
                start(served, body: RequestBody(buffer: ByteBuffer()), context: context)
            case .collect(let declared):
                // The buffer is made when the body starts arriving (a head alone costs nothing).
                collecting = (served, declared, ByteBuffer())
            case .stream:
                let (body, source) = RequestBodyStream.make(handler: NIOLoopBound(self, eventLoop: context.eventLoop), exchange: exchange)
                bodyStream = source
                start(served, body: RequestBody(asyncSequence: body), context: context)
            }
        case .body(var buffer):
            if var collected = collecting {
                collecting = nil
                if collected.body.capacity == 0 { collected.body.reserveCapacity(collected.declared) }
                collected.body.writeBuffer(&buffer)
                collecting = collected
            } else if let bodyStream {
                if bodyStream.yield(buffer) == .stopProducing { perform(machine.bodyBackPressure(stop: true)) }
            }
        // Otherwise the handler has answered without reading it all: dropped.
        case .end:
            if let (served, _, body) = collecting {
                collecting = nil
                start(served, body: RequestBody(buffer: body), context: context)
            } else if endBody() {
                perform(machine.bodyBackPressure(stop: false))
            }
        }
    }

    /// Passes on pipelined parts now that the current response has ended, up to the next
    /// request that must wait in turn.
    private func drainPipelined(_ context: ChannelHandlerContext) {
        guard !draining else { return }
        draining = true
        defer { draining = false }
        while let next = pipelined.first, !(responding != nil && next.isHead), self.context != nil, machine.isServing {
            pipelined.removeFirst()
            handle(next, context: context)
        }
    }

    // MARK: Request body back pressure (from RequestBodyStream, on the loop)

    /// The handler drained its buffered body parts: reading may go on.
    func bodyWantsMore(exchange current: UInt64) {
        guard current == exchange else { return }
        perform(machine.bodyBackPressure(stop: false))
    }

    /// The body's reader has gone: the rest is dropped as it arrives.
    func bodyAbandoned(exchange current: UInt64) {
        guard current == exchange else { return }
        bodyStream = nil
        perform(machine.bodyBackPressure(stop: false))
    }

    // MARK: The route task

    private func start(_ served: ServedHead, body: RequestBody, context: ChannelHandlerContext) {
        answersHead = served.head.method == .HEAD
        if raw != nil, let constant = served.route.constant, constant.answer.head != nil, served.head.uri.utf8.first == UInt8(ascii: "/"),
            context.channel.isWritable
        {
            // No request value: the answer is the same whatever was asked.
            if configuration.accessLog.isOn { access = AccessLog.Entry(method: served.head.method.rawValue, uri: served.head.uri) }
            responding = exchange
            // Its handling takes no time: the duration recorded is the answer's making, none.
            constant.endpoint.timers.record(method: constant.method, status: constant.answer.response.status, nanoseconds: 0)
            write(constant.answer, exchange: exchange)
            return
        }
        guard let converted = try? HTTPRequest(agentHead: served.head) else {
            badRequest(context)
            return
        }
        let request = Request(head: converted, body: body)
        if configuration.accessLog.isOn { access = AccessLog.Entry(method: served.head.method.rawValue, uri: served.head.uri) }
        responding = exchange
        Self.spawn(
            request, route: served.route, context: requestContext(context.channel, keyRefused: served.keyRefused), exchange: exchange,
            responder: configuration.responder, handler: LoopBoundHandler(self, executor: executor!))
    }

    /// The route context for the next request: a copy of the connection's (made once), or a
    /// new one carrying a request id when debug logging is on.
    private func requestContext(_ channel: any Channel, keyRefused: Bool) -> AgentRequestContext {
        var logger = configuration.logger
        let perRequest = logger.logLevel <= .debug
        if perRequest {
            logger[metadataKey: "hb.request.id"] = .stringConvertible(RequestID())
        } else if var connectionContext {
            connectionContext.webSocketKeyRefused = keyRefused
            return connectionContext
        }
        var made = AgentRequestContext(source: .init(channel: channel, logger: logger), origin: origin)
        made.connectionObserver = connectionObserver
        if !perRequest { connectionContext = made }
        made.webSocketKeyRefused = keyRefused
        return made
    }

    /// Starts the route task (apart from `self`, which only the loop may touch) on the
    /// route's executor, the one decision of where it runs. On the loop: started on this
    /// thread at once, so a handler that does not suspend answers before this read's
    /// processing returns. On the pool: the handler runs on ``HandlerPoolExecutor``; the
    /// response is written by a task of the loop's (one hop back, and the pool's task ends
    /// there instead of hopping to the pool once more only to finish).
    private static func spawn(
        _ request: Request, route: RouteInfo, context: AgentRequestContext, exchange: UInt64, responder: AgentResponder,
        handler: LoopBoundHandler
    ) {
        switch route.executor {
        case .eventLoop:
            // A route that answers at once from memory, while the channel takes writes (else
            // the task's write waits for it): no task at all.
            if case .route(let agentRoute, let endpoint, let captures)? = route.resolution, let immediate = agentRoute.immediate,
                handler.value.context?.channel.isWritable == true
            {
                let response = responder.respondImmediately(
                    to: request, context: context, endpoint: endpoint, captures: captures, path: route.path, immediate: immediate)
                handler.value.write(response, exchange: exchange)
                return
            }
            Task.immediate(executorPreference: handler.executor) {
                let response = await responder.respond(to: request, context: context, route: route)
                await handler.value.write(response, exchange: exchange)
            }
        case .pool:
            Task(executorPreference: HandlerPoolExecutor.shared) {
                let response = await responder.respond(to: request, context: context, route: route)
                Task(executorPreference: handler.executor) {
                    await handler.value.write(response, exchange: exchange)
                }
            }
        }
    }

    /// The fields a response goes out with, in order: the route's, less those the server
    /// sets itself (Date; Server when it has a name; Connection when it closes; Content-Length
    /// when it `ownsLength`), then `length`, Date, Server and `Connection: close`.
    private func responseFields(
        _ headers: HTTPFields, closes: Bool, ownsLength: Bool = false, length: Int? = nil, _ emit: (String, String) -> Void
    ) {
        let serverName = configuration.serverName
        for field in headers {
            let name = field.name
            if name == .date || (serverName != nil && name == .server) || (closes && name == .connection)
                || (ownsLength && name == .contentLength)
            {
                continue
            }
            emit(name.rawName, field.value)
        }
        if let length { emit("Content-Length", String(length)) }
        emit("Date", date.now())
        if let serverName { emit("Server", serverName) }
        if closes { emit("Connection", "close") }
    }

    /// The NIO head of a response with the server's own fields, in one array of the final size.
    private func nioHead(status: HTTPResponse.Status, headers: HTTPFields, closes: Bool) -> HTTPResponseHead {
        var fields: [(String, String)] = []
        fields.reserveCapacity(headers.count + 3)
        responseFields(headers, closes: closes) { fields.append(($0, $1)) }
        return HTTPResponseHead(
            version: .http1_1,
            status: HTTPResponseStatus(statusCode: status.code, reasonPhrase: status.reasonPhrase),
            headers: HTTPHeaders(fields))
    }

    /// Writes `response` (head, body as its writer produces it, end). Runs on the loop. A
    /// body of a declared length up to ``singleFlushLimit`` is collected first and goes out
    /// with its head as one buffer, the immediate answer's way (no response encoder, one
    /// pipeline pass); one that fails, or writes another length than it declared, is
    /// answered as an error instead. The rest stream through the encoder.
    nonisolated(nonsending) func write(_ response: Response, exchange current: UInt64) async {
        guard let context, current == responding else { return }
        if raw != nil, let length = response.body.contentLength, length <= Self.singleFlushLimit, context.channel.isWritable {
            let collected = CollectedBody(limit: Self.singleFlushLimit)
            do {
                try await response.body.write(CollectingBodyWriter(into: collected))
                guard collected.bytes.readableBytes == length else {
                    throw CollectedBody.LengthMismatch(declared: length, written: collected.bytes.readableBytes)
                }
            } catch {
                // Nothing of the answer is written yet: the failure is the answer (500, or the
                // body's own API error), and the connection goes on.
                configuration.logger.debug("response body failed", metadata: ["error": "\(error)"])
                let answer = (error as? APIError) ?? APIError(.internalServerError, "Failed to write the response.", detail: "\(error)")
                write(answer.immediateResponse(), exchange: current)
                return
            }
            write(ImmediateResponse(status: response.status, headers: response.headers, body: collected.bytes), exchange: current)
            return
        }
        if answersHead {
            // Its head alone: the body is not made (a stream may never end). Its length is
            // the body's declared one, else the route's own field, else none.
            let length = response.body.contentLength ?? response.headers[.contentLength].flatMap { Int($0) }
            write(
                ImmediateResponse(status: response.status, headers: response.headers, body: ByteBuffer()), exchange: current,
                length: .ofOmittedBody(length))
            return
        }
        access?.status = Int(response.status.code)
        let flushEachWrite = (response.body.contentLength ?? .max) > Self.singleFlushLimit
        writeHead(status: response.status, headers: response.headers, context: context)
        let writer = ChannelBodyWriter(
            handler: LoopBoundHandler(self, executor: executor!), exchange: current, flushEachWrite: flushEachWrite)
        do {
            try await response.body.write(writer)
        } catch {
            // A body that failed half-way cannot be answered any more: the client sees the
            // connection end before the declared length or the final chunk.
            configuration.logger.debug("response body failed", metadata: ["error": "\(error)"])
            if current == responding {
                logAccess(outcome: "body_failed")
                responding = nil
                self.context?.close(promise: nil)
            }
            return
        }
        finishResponse(exchange: current, trailers: nil)
    }

    /// Writes an answer made at once, on the loop: head and body serialized into one buffer
    /// and written raw, past the response encoder (its three parts would cost three
    /// pipeline passes and a header conversion). Its length is the body's (none for 1xx,
    /// 204 and 304), whatever the route set, or the one `length` states; a HEAD's answer
    /// leaves the body out.
    func write(_ response: ImmediateResponse, exchange current: UInt64, length stated: StatedLength = .body) {
        guard let context, current == responding else { return }
        guard let raw else {
            if answersHead {
                // A length, so that the encoder does not frame the missing body as chunks.
                var headers = response.headers
                headers[.contentLength] = String(stated.length(of: response.body) ?? 0)
                writeHead(status: response.status, headers: headers, context: context)
            } else {
                writeHead(status: response.status, headers: response.headers, context: context)
                context.write(wrapOutboundOut(.body(.byteBuffer(response.body))), promise: nil)
            }
            finishResponse(exchange: current, trailers: nil)
            return
        }
        let code = response.status.code
        let hasBody = code >= 200 && code != 204 && code != 304
        access?.status = code
        let closes = machine.responseMustClose
        var bytes = context.channel.allocator.buffer(capacity: 160 + response.headers.count * 32 + response.body.readableBytes)
        bytes.writeStaticString("HTTP/1.1 ")
        bytes.writeString(String(code))
        bytes.writeStaticString(" ")
        bytes.writeString(response.status.reasonPhrase)
        bytes.writeStaticString("\r\n")
        var saysClose = closes
        let length = hasBody ? stated.length(of: response.body) : nil
        responseFields(response.headers, closes: closes, ownsLength: true, length: length) { name, value in
            if !closes, name.utf8.count == 10, name.lowercased() == "connection", value.lowercased().contains("close") { saysClose = true }
            bytes.writeString(name)
            bytes.writeStaticString(": ")
            bytes.writeString(value)
            bytes.writeStaticString("\r\n")
        }
        bytes.writeStaticString("\r\n")
        if hasBody, !answersHead {
            var body = response.body
            access?.bytes += body.readableBytes
            bytes.writeBuffer(&body)
        }
        if saysClose { machine.responseHeadSaysClose() }
        raw.write(NIOAny(bytes), promise: nil)
        finishResponse(exchange: current, trailers: nil, endWritten: true)
    }

    /// Writes a constant answer, on the loop: its serialized head, Date, Server and
    /// `Connection: close` if the connection closes after it, then its body, in one buffer.
    private func write(_ answer: ConstantAnswer, exchange current: UInt64) {
        guard let context, let raw, let head = answer.head, current == responding else { return }
        let closes = machine.responseMustClose
        access?.status = answer.response.status.code
        var bytes = context.channel.allocator.buffer(capacity: head.readableBytes + 96 + answer.response.body.readableBytes)
        bytes.writeImmutableBuffer(head)
        bytes.writeStaticString("Date: ")
        bytes.writeString(date.now())
        if let serverName = configuration.serverName {
            bytes.writeStaticString("\r\nServer: ")
            bytes.writeString(serverName)
        }
        bytes.writeStaticString(closes ? "\r\nConnection: close\r\n\r\n" : "\r\n\r\n")
        if answer.hasBody, !answersHead {
            access?.bytes += answer.response.body.readableBytes
            bytes.writeImmutableBuffer(answer.response.body)
        }
        if closes { machine.responseHeadSaysClose() }
        raw.write(NIOAny(bytes), promise: nil)
        finishResponse(exchange: current, trailers: nil, endWritten: true)
    }

    /// Writes a response's head; a head that closes the connection tells the machine.
    private func writeHead(status: HTTPResponse.Status, headers: HTTPFields, context: ChannelHandlerContext) {
        let closes = machine.responseMustClose
        let head = nioHead(status: status, headers: headers, closes: closes)
        if closes || (head.headers.contains(name: "connection") && !head.isKeepAlive) { machine.responseHeadSaysClose() }
        context.write(wrapOutboundOut(.head(head)), promise: nil)
    }

    /// Writes one body part (from ``ChannelBodyWriter``, on the loop); waits while the
    /// channel is not writable, for at most the write-stall time.
    nonisolated(nonsending) func writeBody(_ buffer: ByteBuffer, exchange current: UInt64, flush: Bool) async throws {
        guard let context, context.channel.isActive, current == responding else { throw ChannelError.ioOnClosedChannel }
        if !context.channel.isWritable {
            // The promise is in place before the flush, which may report writability
            // synchronously.
            let promise = context.eventLoop.makePromise(of: Void.self)
            writable = promise
            perform(machine.writeBlocked(now: clock.now))
            context.flush()
            if context.channel.isWritable, let waiting = writable {
                writable = nil
                perform(machine.writeUnblocked(now: clock.now))
                waiting.succeed(())
            }
            try await promise.futureResult.get()
            context.eventLoop.assertInEventLoop()
        }
        guard let context = self.context, current == responding else { throw ChannelError.ioOnClosedChannel }
        access?.bytes += buffer.readableBytes
        if flush {
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        } else {
            context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        }
    }

    /// Ends the response (once): the next request may start, or the connection closes.
    /// `endWritten`: the response went out whole, raw (no end part for the encoder).
    func finishResponse(exchange current: UInt64, trailers: HTTPFields?, endWritten: Bool = false) {
        guard current == responding, let context else { return }
        logAccess()
        responding = nil
        // A body the handler left unread is dropped as it arrives.
        if endBody() { perform(machine.bodyBackPressure(stop: false)) }
        if !endWritten { context.write(wrapOutboundOut(.end(trailers.map { HTTPHeaders($0) })), promise: nil) }
        perform(machine.responseEnded(now: clock.now))
        let serving = machine.isServing
        if serving {
            context.flush()
        } else if !machine.isClosing {
            return
        }
        // What the socket did not take waits in the channel: no more requests until it does,
        // and the next request's deadline (or the close's linger) starts only then.
        if !context.channel.isWritable { perform(machine.outputBlocked(now: clock.now)) }
        if serving, !pipelined.isEmpty { drainPipelined(context) }
    }

    func logAccess(outcome: String? = nil) {
        guard let entry = access else { return }
        access = nil
        configuration.accessLog.record(entry, listener: origin.listener, outcome: outcome)
    }

    /// Answers 400 and closes: a request head that is not valid HTTP semantics.
    private func badRequest(_ context: ChannelHandlerContext) {
        machine.requestUnreadable()
        responding = exchange
        var headers = HTTPHeaders()
        headers.add(name: "connection", value: "close")
        headers.add(name: "content-length", value: "0")
        machine.responseHeadSaysClose()
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .badRequest, headers: headers))), promise: nil)
        finishResponse(exchange: exchange, trailers: nil)
    }

    /// Ends the streamed body, if one is open (its reader sees the end, or `error`). True
    /// if there was one.
    @discardableResult
    func endBody(failing error: (any Error)? = nil) -> Bool {
        guard let bodyStream else { return false }
        self.bodyStream = nil
        if let error { bodyStream.finish(error) } else { bodyStream.finish() }
        return true
    }
}
