import AgentCore
import CoreMetrics
import HTTPTypes
import Logging
import NIOCore
import NIOHTTP1

/// Carrying out the machine's actions.
extension HTTP1ConnectionHandler {
    func perform(_ actions: Machine.Actions) {
        for index in 0..<actions.count { perform(actions[index]) }
    }

    func perform(_ action: Machine.Action) {
        switch action {
        case .forward, .hold:
            // Handled where the part is at hand.
            break
        case .forwardHead(let forwarded):
            forwardHead(forwarded)
        case .admitWebSocket:
            admitWebSocket()
        case .prepareWebSocket:
            prepareWebSocket()
        case .releaseWebSocketSlot:
            releaseWebSocketSlot()
        case .send100Continue:
            writeRaw(ByteBuffer(string: "HTTP/1.1 100 Continue\r\n\r\n"), flush: true)
        case .refuse(let refusal):
            writeRefusal(refusal)
        case .failBody(let failure):
            collecting = nil
            switch failure {
            case .incomplete: endBody(failing: RequestBodyError.incomplete)
            case .malformed(let detail): endBody(failing: RequestBodyError.malformed(detail))
            }
        case .switchToWebSocket:
            // After the 101 (the machine enters the WebSocket state at the handshake's end).
            break
        case .ping:
            // No payload; server frames are unmasked. Written whole on the loop, so it never
            // lands inside a frame the WebSocket handler is writing.
            writeRaw(ByteBuffer(bytes: [0x89, 0x00]), flush: true)
        case .sendClose(let code):
            writeRaw(ByteBuffer(bytes: [0x88, 0x02, UInt8(code >> 8), UInt8(code & 0xFF)]), flush: true)
        case .resumeReads:
            if readPending, let context {
                readPending = false
                context.read()
            }
        case .armTimer(let timer, let delay):
            arm(timer, in: delay)
        case .setPhase(let phase):
            setPhase(phase)
        case .countClose(let reason):
            HTTPMetrics.closed(reason).increment()
            if reason == "write_stall" {
                configuration.logger.info(
                    "closed a connection whose client stopped reading its response",
                    metadata: ["after": "\(configuration.machine.writeStallTimeout)"])
            }
        case .closeOutput:
            stopServing()
            // Our side first (the client reads every answer, then EOF); the client's FIN or
            // the linger deadline closes the rest.
            let channel = self.channel
            writeRaw(ByteBuffer(), flush: true) { channel?.close(mode: .output, promise: nil) }
        case .closeAfterWrites:
            let channel = self.channel
            writeRaw(ByteBuffer(), flush: true) { channel?.close(promise: nil) }
        case .close:
            channel?.close(promise: nil)
        }
    }

    /// Nothing more is served: waiting requests are dropped (the machine has let reads go
    /// on: input is read and dropped while the connection lingers).
    private func stopServing() {
        pipelined.removeAll()
        collecting = nil
        endBody(failing: ChannelError.outputClosed)
    }

    var channel: (any Channel)? { raw?.channel ?? context?.channel }

    /// Writes on the socket side of the codec (ahead of it).
    func writeRaw(_ buffer: ByteBuffer, flush: Bool, then: (() -> Void)? = nil) {
        guard let raw else {
            then?()
            return
        }
        if let then {
            raw.writeAndFlush(NIOAny(buffer)).assumeIsolated().whenComplete { _ in then() }
        } else if flush {
            raw.writeAndFlush(NIOAny(buffer), promise: nil)
        } else {
            raw.write(NIOAny(buffer), promise: nil)
        }
    }

    /// The reference's JSON error body (its length alone for a HEAD), `Connection: close`.
    private func writeRefusal(_ refusal: ConnectionRefusal) {
        HTTPMetrics.guardResponse(refusal.status.code)
        var buffer = ByteBuffer()
        let json = JSONResponse.encode(refusal.body)
        buffer.writeString("HTTP/1.1 \(refusal.status.code) \(refusal.status.reasonPhrase)\r\n")
        buffer.writeString("Content-Type: \(JSONResponse.contentType)\r\n")
        buffer.writeString("Content-Length: \(json.readableBytes)\r\n")
        buffer.writeString("Connection: close\r\n")
        for header in refusal.headers { buffer.writeString("\(header.name): \(header.value)\r\n") }
        buffer.writeString("\r\n")
        if !refusal.omitsBody { buffer.writeImmutableBuffer(json) }
        writeRaw(buffer, flush: false)
    }

    private func arm(_ timer: ConnectionTimer, in delay: Duration) {
        // A close can happen inside an earlier action of the same list (an output close after
        // the client's own half-close closes the whole channel): no timer outlives it.
        guard !machine.isClosed, let loop = channel?.eventLoop else { return }
        timers[timer.rawValue]?.cancel()
        var delay = delay
        if timer == .writeStall {
            delay = Self.stallWakeUp(in: delay, timeout: configuration.machine.writeStallTimeout)
            stallWatch.scheduled(buffered: bufferedBytes(), lookAt: clock.now.advanced(by: delay))
        }
        let nanoseconds = max(0, delay.components.seconds * 1_000_000_000 + delay.components.attoseconds / 1_000_000_000)
        timers[timer.rawValue] = loop.assumeIsolated().scheduleTask(in: .nanoseconds(nanoseconds)) { [self] in
            timers[timer.rawValue] = nil
            // The write-stall time bounds a socket that takes nothing, not the drain of a large
            // answer by a slow client, nor a loop held up: the deadline moves (the wake-up then
            // finds it ahead and is set again).
            if timer == .writeStall {
                switch stallWatch.look(buffered: bufferedBytes(), now: clock.now) {
                case .progressed: perform(machine.writeProgressed(now: clock.now))
                case .late(let lateness): machine.postponeWriteStall(by: lateness)
                case .stalled: break
                }
            }
            perform(machine.timerFired(timer, now: clock.now))
        }
    }

    /// When to look at a blocked socket next: at its deadline, or sooner, every sixth of the
    /// write-stall time. A look that finds bytes gone moves the deadline to the write-stall
    /// time from then, so a socket is closed 1 to 7/6 of it after it last took data (looking
    /// only at the deadline, a socket that took data just after it was set was given twice).
    static func stallWakeUp(in delay: Duration, timeout: Duration) -> Duration {
        min(delay, max(timeout / 6, .milliseconds(1)))
    }

    /// Bytes waiting for the socket, if the channel says.
    private func bufferedBytes() -> Int? {
        try? channel?.syncOptions?.getOption(ChannelOptions.bufferedWritableBytes)
    }

    private func setPhase(_ phase: ConnectionPhaseReport) {
        guard let (id, cell) = registration else { return }
        let registryPhase: HTTPConnectionRegistry.Phase
        switch phase {
        case .busy: registryPhase = .busy
        case .webSocket: registryPhase = .webSocket
        case .awaitingHead: registryPhase = .awaitingHead(since: .now())
        case .lingering:
            // Its last answer is written: while it lingers it is the first evicted.
            cell.store(.awaitingHead(since: .uptimeNanoseconds(0)))
            return
        }
        if configuration.registry.setPhase(id, cell, registryPhase) {
            // The registry is draining and this connection just went idle.
            let channel = self.channel
            writeRaw(ByteBuffer(), flush: true) { channel?.close(promise: nil) }
        }
    }

    func releaseWebSocketSlot() {
        configuration.registry.releaseWebSocket()
    }

    // MARK: Heads

    private func forwardHead(_ forwarded: Machine.ForwardedHead) {
        guard let pending else { return }
        self.pending = nil
        var head = pending.head
        let route = pending.route
        if forwarded.rewrite.contains(.removeExpect) { head.headers.remove(name: "expect") }
        if forwarded.rewrite.contains(.stripUpgrade) { Self.stripUpgrade(&head) }
        if forwarded.handshake {
            handshake = (head, route)
            return
        }
        serve(.head(ServedHead(head: head, route: route, body: forwarded.body, keyRefused: forwarded.handshakeRefusal == .badKey)))
    }

    private func admitWebSocket() {
        guard let (head, route) = pending, let (webSocketRoute, parameters) = route.webSocket else {
            perform(machine.webSocketAdmission(.checkFailed, route: pending?.route ?? RouteTable.unrouted, now: clock.now))
            return
        }
        let admission: WebSocketAdmission
        do {
            try webSocketRoute.check(WebSocketRouteRequest(headers: HTTPFields(head.headers), parameters: parameters))
            // WebSockets have their own budget, beside the connection cap.
            admission = configuration.registry.reserveWebSocket() ? .admitted(prepare: webSocketRoute.prepare != nil) : .noSlot
        } catch {
            admission = .checkFailed
        }
        perform(machine.webSocketAdmission(admission, route: route, now: clock.now))
    }

    private func prepareWebSocket() {
        guard let (head, route) = pending, let (webSocketRoute, parameters) = route.webSocket, let prepare = webSocketRoute.prepare,
            let loop = channel?.eventLoop
        else { return }
        let request = WebSocketRouteRequest(headers: HTTPFields(head.headers), parameters: parameters)
        let bound = NIOLoopBound(self, eventLoop: loop)
        Task {
            let admitted: Bool
            do {
                try await prepare(request)
                admitted = true
            } catch {
                admitted = false
            }
            bound.eventLoop.execute { bound.value.prepared(admitted) }
        }
    }

    private func prepared(_ admitted: Bool) {
        guard let context, context.channel.isActive, let route = pending?.route else { return }
        perform(machine.webSocketPrepared(admitted, route: route, now: clock.now))
        let parts = heldParts
        heldParts = []
        for part in parts {
            channelRead(context: context, data: NIOAny(part))
        }
    }

    static func stripUpgrade(_ head: inout HTTPRequestHead) {
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
