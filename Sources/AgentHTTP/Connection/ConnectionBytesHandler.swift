import NIOCore

/// The first handler of every connection (raw bytes, socket side of the HTTP codec). It keeps
/// no connection state of its own: it reports each read to the connection's
/// ``HTTP1ConnectionHandler`` (whose state machine measures the request line, counts chunk
/// framing and watches a WebSocket peer) and passes it to the decoder when told to. Beside
/// that it holds bytes, not state:
///
/// - a copy of the connection's first request's bytes (only a first request may be a
///   WebSocket handshake) until its head shows it is not one (at most ``headCopyLimit``): frames a client sends right behind its handshake
///   are already inside the decoder when the connection switches, and are taken from here;
/// - after the switch, the WebSocket mask check over every client byte, and the reads that
///   arrive while the upgrade completes.
///
/// Used only on the connection's event loop.
final class ConnectionBytesHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// The longest head that can be a handshake the decoder accepts, plus a header field.
    static let headCopyLimit = AgentHTTPLimits.maxHeaderListSize + AgentHTTPLimits.maxHeaderFieldSize

    /// The connection's handler (kept alive here after it leaves the pipeline at an upgrade).
    let connection: HTTP1ConnectionHandler
    private(set) var context: ChannelHandlerContext?
    private var headCopy: [UInt8] = []
    private var copying = true
    private var maskCheck: WebSocketMaskCheck?
    /// Reads held while the upgrade completes (nil: none being held). Bounded by the
    /// socket's reads in the few loop turns an upgrade takes; at most
    /// ``maxHeldBytes`` before the connection closes.
    private var held: [ByteBuffer]?
    private var heldBytes = 0
    static let maxHeldBytes = 1 << 20

    init(connection: HTTP1ConnectionHandler) {
        self.connection = connection
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) {
        connection.closedAfterUpgrade()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        connection.closedAfterUpgrade()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        if maskCheck != nil {
            if !maskCheck!.feed(buffer.readableBytesView) {
                connection.webSocketUnmasked()
                return
            }
            guard connection.bytesReceived(count: buffer.readableBytes, newline: nil) else { return }
            if held != nil {
                heldBytes += buffer.readableBytes
                held!.append(buffer)
                if heldBytes > Self.maxHeldBytes { context.close(promise: nil) }
                return
            }
            context.fireChannelRead(data)
            return
        }
        let newline = buffer.readableBytesView.firstIndex(of: UInt8(ascii: "\n")).map { $0 - buffer.readerIndex }
        if copying {
            if headCopy.count + buffer.readableBytes > Self.headCopyLimit {
                stopCopyingHead()
            } else {
                headCopy += buffer.readableBytesView
            }
        }
        guard connection.bytesReceived(count: buffer.readableBytes, newline: newline) else { return }
        context.fireChannelRead(data)
        connection.bytesProcessed()
    }

    /// The current request is complete. Only a connection's first request may be a
    /// handshake (a later one is refused before any switch), so no later head is copied.
    func requestEnded() {
        headCopy = []
        copying = false
    }

    /// The current request is not a WebSocket handshake: its bytes need no copy.
    func stopCopyingHead() {
        copying = false
        headCopy = []
    }

    /// The handshake's request ended: from here on the bytes are client frames. Those that
    /// came behind the head are taken from the copy; they and later reads are held until
    /// ``upgradeCompleted()``. False if a frame so far is unmasked.
    func switchToWebSocket() -> Bool {
        var check = WebSocketMaskCheck()
        let separator: [UInt8] = [13, 10, 13, 10]
        let afterHead = headCopy.firstRange(of: separator).map { Array(headCopy[$0.upperBound...]) } ?? []
        let clean = check.feed(afterHead)
        maskCheck = check
        headCopy = []
        copying = false
        held = afterHead.isEmpty ? [] : [ByteBuffer(bytes: afterHead)]
        heldBytes = afterHead.count
        return clean
    }

    /// The WebSocket handlers are in place: the held reads go to them.
    func upgradeCompleted() {
        guard let context, let reads = held else { return }
        held = nil
        heldBytes = 0
        for read in reads { context.fireChannelRead(wrapInboundOut(read)) }
        if !reads.isEmpty { context.fireChannelReadComplete() }
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
