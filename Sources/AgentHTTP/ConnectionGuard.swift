import CoreMetrics
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import HTTPTypes
import NIOCore
import NIOWebSocket

/// The first handler of every connection (raw bytes, socket side of the HTTP codec).
///
/// - Registers the connection with the ``HTTPConnectionRegistry`` (which may refuse it).
/// - Writes the responses the agent gives without the HTTP codec (408, 413, 414, 417, 431,
///   405 to CONNECT, 400 for malformed HTTP), then closes gracefully: output is shut, the
///   client's remaining bytes are read and dropped for at most ``lingerTimeout`` so that it
///   sees the response rather than a reset.
/// - Tracks the length of the current request line, which tells 414 from 431.
/// - After a WebSocket upgrade, checks that every client frame is masked (RFC 6455 §5.1)
///   and fails the connection with close code 1002 otherwise.
/// - Holds the connection's WebSocket slot (``HTTPConnectionRegistry/maxWebSockets``) from
///   the handshake's admission until the connection ends.
/// - Keeps a WebSocket's peer honest: after ``webSocketPingInterval`` without a byte from
///   it, a ping; after another interval still without a byte (no pong, no frame), a close
///   frame (1001, going away) and the connection closes. This works on raw bytes, so it
///   holds whether or not the route's handler reads what the client sends.
///
/// Used only on the connection's event loop.
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = NIOAny
    typealias OutboundOut = ByteBuffer

    /// How long a refused client gets to read our answer before the connection closes.
    static let lingerTimeout: TimeAmount = .seconds(2)

    private let registry: HTTPConnectionRegistry
    private(set) var id: UInt64?
    private var phase: HTTPConnectionRegistry.PhaseCell?
    private var context: ChannelHandlerContext?
    /// Bytes received since the current request began (a partial head when > 0 and no head yet).
    private(set) var bytesSinceRequestStart = 0
    /// Length of the current request's first line, once it ended.
    private var requestLineLength: Int?
    /// The current request began inside a read already passed on (pipelined behind the
    /// request that ended there): its request line cannot be measured from here.
    private var requestStartUnknown = false
    /// A read is being passed to the decoder.
    private var forwarding = false
    /// Set after the error response: input is dropped until the connection closes.
    private var discarding = false
    private var maskCheck: WebSocketMaskCheck?
    /// The current request's bytes, kept only until its head shows it is not a WebSocket
    /// handshake (and at most ``headCopyLimit``): frames a client sends right behind its
    /// handshake have already passed here when the connection switches, and are checked
    /// from this copy.
    private var headCopy: [UInt8] = []
    /// Set when the registry refused this connection because the agent is shutting down.
    private var drainingRefusal = false
    private var copyingHead = true
    static let headCopyLimit = AgentHTTPLimits.maxHeaderListSize + AgentHTTPLimits.maxHeaderFieldSize

    /// A WebSocket silent this long is pinged, and closed after as long again.
    private let webSocketPingInterval: TimeAmount
    /// Whether this connection holds a WebSocket slot.
    private var holdsWebSocketSlot = false
    private var webSocketWatch: RepeatedTask?
    /// Bytes came from the WebSocket peer since the last tick.
    private var heardFromPeer = false
    /// A ping went out at the last tick and nothing has come since.
    private var pinged = false
    /// The `101 Switching Protocols` answer has been written: frames (our pings) may follow.
    private var upgradeAnswered = false

    /// How long a client refused during shutdown may take to send its request (the head
    /// deadline every connection gets) before it is closed without an answer.
    private let headTimeout: TimeAmount

    init(
        registry: HTTPConnectionRegistry, webSocketPingInterval: TimeAmount = .init(AgentHTTPLimits.webSocketPingInterval),
        headTimeout: TimeAmount = .init(AgentHTTPLimits.requestHeadTimeout)
    ) {
        self.registry = registry
        self.webSocketPingInterval = webSocketPingInterval
        self.headTimeout = headTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        switch registry.admit(context.channel) {
        case .admitted(let id, let phase):
            self.id = id
            self.phase = phase
        case .refused:
            context.close(promise: nil)
        case .draining:
            // Answered 503 once the client has sent something (an answer before the request
            // would race the client's write); a client that sends nothing is closed at the
            // head deadline, as any connection is. (The linger time was too short for a
            // client on a loaded machine: it saw the connection close with no answer.)
            drainingRefusal = true
            let channel = context.channel
            context.eventLoop.scheduleTask(in: headTimeout) { channel.close(promise: nil) }
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        if let id { registry.remove(id) }
        connectionEnded()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let id { registry.remove(id) }
        connectionEnded()
        context.fireChannelInactive()
    }

    private func connectionEnded() {
        webSocketWatch?.cancel()
        webSocketWatch = nil
        releaseWebSocketSlot()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if discarding { return }
        if drainingRefusal {
            respondAndClose(
                .serviceUnavailable,
                APIErrorBody(message: "The agent is shutting down.", detail: "It accepts no new connections."))
            return
        }
        let buffer = unwrapInboundIn(data)
        if maskCheck != nil {
            heardFromPeer = true
            if !maskCheck!.feed(buffer.readableBytesView) {
                failWebSocket(context)
                return
            }
        } else {
            if requestLineLength == nil, !requestStartUnknown, let newline = buffer.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) {
                requestLineLength = bytesSinceRequestStart + (newline - buffer.readerIndex)
            }
            bytesSinceRequestStart += buffer.readableBytes
            if copyingHead {
                if headCopy.count + buffer.readableBytes > Self.headCopyLimit {
                    stopCopyingHead()
                } else {
                    headCopy += buffer.readableBytesView
                }
            }
        }
        chunkFraming?.received(buffer.readableBytes)
        forwarding = true
        context.fireChannelRead(data)
        forwarding = false
        if chunkFraming?.isExceeded == true {
            chunkFraming = nil
            // The body's reader fails and its route answers 400 (``HTTPResponderHandler``);
            // nothing after this is parsed.
            discarding = true
            context.fireErrorCaught(RequestBodyError.malformed(
                "More than \(ChunkFramingBudget.maxExcess) bytes of chunk framing (sizes, extensions) beyond what the chunks' data allows."))
        }
    }

    // MARK: Chunked bodies (called by HTTPRequestGuard, same event loop)

    /// The chunk framing of the chunked body being read; nil when none is. The read that
    /// carried the head is not counted (its bytes are mostly the head's).
    private var chunkFraming: ChunkFramingBudget?

    func chunkedBodyBegins() { chunkFraming = ChunkFramingBudget() }
    func chunkedBodyData(_ bytes: Int) { chunkFraming?.data(bytes) }
    func chunkedBodyEnds() { chunkFraming = nil }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        context.write(data, promise: promise)
    }

    // MARK: Called by HTTPRequestGuard (same event loop)

    /// For a head the decoder found too large: whether its request line is what overflowed
    /// (measured, or never ended so far); false when the line could not be measured.
    func requestLineExceeds(_ limit: Int) -> Bool {
        if let requestLineLength { return requestLineLength > limit }
        return !requestStartUnknown
    }

    /// The previous request is complete: the next bytes start a new one.
    func requestEnded() {
        bytesSinceRequestStart = 0
        requestLineLength = nil
        requestStartUnknown = forwarding
        headCopy.removeAll(keepingCapacity: headCopy.capacity <= Self.keptHeadCapacity)
        copyingHead = true
    }

    /// The current request is not a WebSocket handshake: its bytes need no copy.
    /// A typical head's copy keeps its storage between requests (no allocation per
    /// request); a large one's is freed.
    static let keptHeadCapacity = 4096

    func stopCopyingHead() {
        copyingHead = false
        headCopy.removeAll(keepingCapacity: headCopy.capacity <= Self.keptHeadCapacity)
    }

    func setPhase(_ phase: HTTPConnectionRegistry.Phase) {
        if let id, let cell = self.phase, registry.setPhase(id, cell, phase) { closeAfterPendingWrites() }
    }

    /// The registry's WebSocket budget.
    var maxWebSockets: Int { registry.maxWebSockets }

    /// Takes a WebSocket slot for a handshake about to be admitted (at most one per
    /// connection); false when the WebSockets' budget is used up.
    func reserveWebSocketSlot() -> Bool {
        if holdsWebSocketSlot { return true }
        holdsWebSocketSlot = registry.reserveWebSocket()
        return holdsWebSocketSlot
    }

    /// The 101 is on the wire (NIO's upgrader calls the upgraded pipeline's setup after
    /// writing it): pings may go out from now on.
    func webSocketAnswered() {
        upgradeAnswered = true
    }

    /// The handshake was not admitted after all: the slot goes back.
    func releaseWebSocketSlot() {
        guard holdsWebSocketSlot else { return }
        holdsWebSocketSlot = false
        registry.releaseWebSocket()
    }

    /// The connection is now a WebSocket: check client frames from here on.
    func switchToWebSocket() {
        guard maskCheck == nil else { return }
        if let context, webSocketWatch == nil {
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            webSocketWatch = context.eventLoop.scheduleRepeatedTask(initialDelay: webSocketPingInterval, delay: webSocketPingInterval) { _ in
                bound.value.webSocketTick()
            }
        }
        var check = WebSocketMaskCheck()
        let separator: [UInt8] = [13, 10, 13, 10]
        let afterHead = headCopy.firstRange(of: separator).map { headCopy[$0.upperBound...] } ?? []
        let clean = check.feed(afterHead)
        maskCheck = check
        headCopy = []
        setPhase(.webSocket)
        if !clean, let context { failWebSocket(context) }
    }

    /// `100 Continue`, written ahead of the codec.
    func sendContinue() {
        guard let context, !discarding else { return }
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: "HTTP/1.1 100 Continue\r\n\r\n")), promise: nil)
    }

    /// Answers with the reference's JSON error body and closes the connection gracefully.
    func respondAndClose(_ status: HTTPResponse.Status, _ body: APIErrorBody, headers: [(String, String)] = []) {
        guard let context, !discarding else { return }
        discarding = true
        HTTPMetrics.guardResponse(status.code)
        var buffer = ByteBuffer()
        let json = JSONResponse.encode(body)
        buffer.writeString("HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\n")
        buffer.writeString("Content-Type: \(JSONResponse.contentType)\r\n")
        buffer.writeString("Content-Length: \(json.readableBytes)\r\n")
        buffer.writeString("Connection: close\r\n")
        for (name, value) in headers { buffer.writeString("\(name): \(value)\r\n") }
        buffer.writeString("\r\n")
        buffer.writeImmutableBuffer(json)
        context.write(wrapOutboundOut(buffer), promise: nil)
        closeGracefullyAfterPendingWrites()
    }

    /// Closes at once (an idle connection that never started a request).
    func close() {
        context?.close(promise: nil)
    }

    /// Closes once everything written so far is on the socket. (A response's head, body and
    /// end are written together and flushed after the last: closing at once from the end's
    /// write would drop the unflushed head and body.)
    func closeAfterPendingWrites() {
        guard let context else { return }
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(ByteBuffer())).whenComplete { _ in channel.close(promise: nil) }
    }

    /// Shuts our side once everything written so far is on the socket; the client's FIN,
    /// or the linger timeout, closes the rest. (Closing at once while the client's bytes
    /// sit unread would reset the connection, and the client could lose the last answer.)
    func closeGracefullyAfterPendingWrites() {
        guard let context else { return }
        // Its last answer is written: while it lingers it is the first connection evicted
        // to make room (a flood of refused handshakes cannot fill the cap).
        if maskCheck == nil { phase?.store(.awaitingHead(since: .uptimeNanoseconds(0))) }
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(ByteBuffer())).whenComplete { _ in channel.close(mode: .output, promise: nil) }
        context.eventLoop.scheduleTask(in: Self.lingerTimeout) { channel.close(promise: nil) }
    }

    /// Every ``webSocketPingInterval`` on a WebSocket: a peer heard from is fine; a silent
    /// one is pinged; one silent since the last ping is closed (1001) and disconnected.
    private func webSocketTick() {
        // Nothing may go out before the 101 (the watch starts when the handshake's request
        // ends, and the answer may come later).
        guard let context, !discarding, upgradeAnswered else { return }
        if heardFromPeer {
            heardFromPeer = false
            pinged = false
        } else if !pinged {
            pinged = true
            // Ping, no payload; server frames are unmasked. Written whole on the loop, so it
            // never lands inside a frame the WebSocket handler is writing.
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: [0x89, 0x00])), promise: nil)
        } else {
            discarding = true
            webSocketWatch?.cancel()
            webSocketWatch = nil
            HTTPMetrics.closed("websocket_idle").increment()
            // Close frame, status 1001 (going away); the peer answered nothing, so no close
            // handshake is awaited.
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: [0x88, 0x02, 0x03, 0xE9]))).whenComplete { _ in
                channel.close(promise: nil)
            }
            // A peer that does not read either: the close frame may never flush.
            context.eventLoop.scheduleTask(in: Self.lingerTimeout) { channel.close(promise: nil) }
        }
    }

    /// Ends a WebSocket whose client broke a rule (``WebSocketMessageGuard``): the close
    /// frame with `code`, then our side shuts and the client's remaining bytes are dropped
    /// until it closes or the linger time passes (so it reads the close frame rather than a
    /// reset).
    func closeWebSocket(code: WebSocketErrorCode) {
        guard let context, !discarding else { return }
        discarding = true
        webSocketWatch?.cancel()
        webSocketWatch = nil
        var frame = ByteBuffer(bytes: [0x88, 0x02])
        frame.write(webSocketErrorCode: code)
        context.write(wrapOutboundOut(frame), promise: nil)
        closeGracefullyAfterPendingWrites()
    }

    private func failWebSocket(_ context: ChannelHandlerContext) {
        discarding = true
        // Close frame, status 1002 (protocol error); server frames are unmasked.
        let frame = ByteBuffer(bytes: [0x88, 0x02, 0x03, 0xEA])
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(frame)).whenComplete { _ in channel.close(promise: nil) }
    }
}

/// Follows client WebSocket frame headers in a byte stream and reports an unmasked frame.
/// State: at most 14 header bytes and a payload count.
struct WebSocketMaskCheck {
    private var header: [UInt8] = []
    private var payloadRemaining: UInt64 = 0

    /// Consumes `bytes`; false as soon as a frame without the mask bit is seen.
    mutating func feed<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Bool where Bytes.Index == Int {
        var index = bytes.startIndex
        while index < bytes.endIndex {
            if payloadRemaining > 0 {
                let skip = min(UInt64(bytes.endIndex - index), payloadRemaining)
                index += Int(skip)
                payloadRemaining -= skip
                continue
            }
            header.append(bytes[index])
            index += 1
            guard header.count >= 2 else { continue }
            if header[1] & 0x80 == 0 { return false }
            let length7 = header[1] & 0x7F
            let extended = length7 == 126 ? 2 : length7 == 127 ? 8 : 0
            guard header.count == 2 + extended + 4 else { continue }
            var length = UInt64(length7)
            if extended > 0 {
                length = header[2..<(2 + extended)].reduce(0) { $0 << 8 | UInt64($1) }
            }
            payloadRemaining = length
            header.removeAll(keepingCapacity: true)
        }
        return true
    }
}
