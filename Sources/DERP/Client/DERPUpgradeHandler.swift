import AgentSystem
import FoundationEssentials
import NIOCore
import NIOTLS
import NIOWebSocket

/// Sends `GET /derp` with `Upgrade: DERP` (or a WebSocket handshake with subprotocol
/// `derp`) and reads the response head. On 101 it hands every byte after the head to the
/// DERP handler behind it — behind a WebSocket codec and ``DERPWebSocketAdapter`` for the
/// WebSocket transport, whose `Sec-WebSocket-Accept` it checks — and leaves the pipeline;
/// on anything else it reads up to ``maxBody`` bytes of the body and fails the attempt with
/// the status (4xx switches the client to WebSocket, 5xx is retried).
///
/// The server speaks first after the 101 (ServerKey), often in the same read as the head,
/// which is why the head is parsed here and not by NIO's upgrade handlers.
///
/// Bounds: the head may be at most ``maxHead`` bytes, the kept body ``maxBody``, a
/// WebSocket frame ``maxWebSocketMessage``.
final class DERPUpgradeHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    static let maxHead = 16 << 10
    static let maxBody = 4 << 10
    /// Largest WebSocket frame accepted (a DERP frame is at most 1 MiB; a WebSocket frame
    /// may carry parts of two). Frames are passed on one by one, so no message is gathered.
    static let maxWebSocketMessage = 2 << 20
    static let webSocketGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    private let hostHeader: String
    private let attempt: DERPConnectAttempt
    /// The WebSocket handshake's key; nil for `Upgrade: DERP`.
    private let webSocketKey: String?
    private var received: [UInt8] = []
    /// How much of `received` has been searched for the head's end: each read's bytes are
    /// searched once (a relay that sends its head a byte at a time costs no quadratic scan).
    private var searched = 0
    private var refusal: (status: Int, bodyStart: Int, contentLength: Int?)?
    private var requested = false
    private var upgraded = false

    init(hostHeader: String, webSocket: Bool, attempt: DERPConnectAttempt) {
        self.hostHeader = hostHeader
        self.attempt = attempt
        self.webSocketKey = webSocket ? Data(CryptoSetup.random(count: 16)).base64EncodedString() : nil
    }

    /// The request, byte for byte: `Upgrade: DERP`, or a WebSocket handshake with `key`.
    static func request(hostHeader: String, webSocketKey: String? = nil) -> String {
        guard let key = webSocketKey else {
            return "GET /derp HTTP/1.1\r\nHost: \(hostHeader)\r\nUser-Agent: coder-agent-swift\r\nUpgrade: DERP\r\nConnection: Upgrade\r\n\r\n"
        }
        return "GET /derp HTTP/1.1\r\nHost: \(hostHeader)\r\nUser-Agent: coder-agent-swift\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: derp\r\n\r\n"
    }

    /// What the server must answer in `Sec-WebSocket-Accept` (RFC 6455 §4.2.2).
    static func webSocketAccept(key: String) -> String {
        Data(SHA1.hash(Array((key + webSocketGUID).utf8))).base64EncodedString()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { sendRequest(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        sendRequest(context: context)
        context.fireChannelActive()
    }

    private func sendRequest(context: ChannelHandlerContext) {
        guard !requested else { return }
        requested = true
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: Self.request(hostHeader: hostHeader, webSocketKey: webSocketKey))), promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tls = event as? TLSUserEvent, case .handshakeCompleted(let proto) = tls, proto == "h2" {
            attempt.fail(.negotiatedHTTP2)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        if upgraded {
            context.fireChannelRead(data)
            return
        }
        if let refusal {
            received += buffer.readableBytesView.prefix(max(0, refusal.bodyStart + Self.maxBody - received.count))
            finishRefusalIfComplete()
            return
        }
        received += buffer.readableBytesView
        buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
        let found = Self.headEnd(received, from: searched)
        searched = received.count
        guard let end = found, end <= Self.maxHead else {
            // The bound holds however the head arrived: in one read or in many.
            if received.count > Self.maxHead { attempt.fail(.badResponse("response head over \(Self.maxHead) bytes")) }
            return
        }
        let head = String(decoding: received[..<end], as: UTF8.self)
        let lines = head.split(separator: "\r\n")
        let parts = lines.first?.split(separator: " ", maxSplits: 2) ?? []
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            attempt.fail(.badResponse("not an HTTP response"))
            return
        }
        guard status == 101 else {
            let length = lines.dropFirst().first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.dropFirst("content-length:".count).trimmingSpaces) }
            refusal = (status, end, length)
            finishRefusalIfComplete()
            return
        }
        // Frames follow the head at once: whatever came with it belongs to the DERP handler.
        let rest = Array(received[end...])
        received = []
        upgraded = true
        if let key = webSocketKey {
            let accept = lines.dropFirst().first { $0.lowercased().hasPrefix("sec-websocket-accept:") }
                .map { $0.dropFirst("sec-websocket-accept:".count).trimmingSpaces }
            guard accept == Self.webSocketAccept(key: key) else {
                attempt.fail(.badResponse("wrong Sec-WebSocket-Accept"))
                return
            }
            do {
                try installWebSocket(context: context)
            } catch {
                attempt.fail(.failed("WebSocket setup: \(error)"))
                return
            }
        }
        if !rest.isEmpty { context.fireChannelRead(wrapInboundOut(context.channel.allocator.buffer(bytes: rest))) }
        context.pipeline.syncOperations.removeHandler(self, promise: nil)
    }

    /// Where the first `\r\n\r\n` in `bytes` ends, searching from `from` (less the three
    /// bytes of an end the last read may have cut); nil if there is none.
    static func headEnd(_ bytes: [UInt8], from: Int) -> Int? {
        var index = max(0, from - 3)
        while index + 4 <= bytes.count {
            if bytes[index] == 13, bytes[index + 1] == 10, bytes[index + 2] == 13, bytes[index + 3] == 10 { return index + 4 }
            index += 1
        }
        return nil
    }

    /// The WebSocket codec between us and the DERP handler: frames in, binary messages out.
    private func installWebSocket(context: ChannelHandlerContext) throws {
        let operations = context.pipeline.syncOperations
        let decoder = ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: Self.maxWebSocketMessage))
        try operations.addHandler(decoder, position: .after(self))
        try operations.addHandler(DERPWebSocketAdapter(masking: true), position: .after(decoder))
        try operations.addHandler(WebSocketFrameEncoder(), position: .before(self))
    }

    func channelInactive(context: ChannelHandlerContext) {
        if upgraded {
            context.fireChannelInactive()
            return
        }
        if refusal != nil {
            failRefused()
        } else {
            attempt.fail(.failed("connection closed before the upgrade was answered"))
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        attempt.fail(.failed("\(error)"))
        context.fireErrorCaught(error)
    }

    /// How much of a refusal's body is read: its `Content-Length` (none for a negative one),
    /// at most ``maxBody``.
    private static func bodyLimit(_ refusal: (status: Int, bodyStart: Int, contentLength: Int?)) -> Int {
        min(max(0, refusal.contentLength ?? maxBody), maxBody)
    }

    private func finishRefusalIfComplete() {
        guard let refusal else { return }
        if received.count - refusal.bodyStart >= Self.bodyLimit(refusal) { failRefused() }
    }

    /// Fails with the refusal's status and body: the body's declared length of it, however
    /// the reads cut it (what follows is not the body).
    private func failRefused() {
        guard let refusal else { return }
        let body = String(decoding: received[refusal.bodyStart...].prefix(Self.bodyLimit(refusal)), as: UTF8.self)
        attempt.fail(.refused(status: refusal.status, body: body.trimmingSpaces))
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces, tabs and line ends.
    var trimmingSpaces: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }
}
