import CoreMetrics
import NIOCore
import NIOWebSocket

/// Checks every inbound WebSocket frame of a connection before its route's handler sees it,
/// so that no route can be made to collate without bound, whatever it does with frames:
///
/// - a message (its first frame and continuations) over ``WebSocketLimits/maxMessageBytes``
///   or ``WebSocketLimits/maxMessageFragments`` closes the connection with 1009;
/// - a continuation with no message to continue, or a new message inside an unfinished
///   one, with 1002 (protocol error);
/// - text that is not UTF-8 (checked across fragments, and at the message's end), with 1007.
///
/// Every frame is reported to the connection first (the peer is heard); one without the mask
/// bit (RFC 6455 §5.1) is refused there with 1002. Control frames (ping, pong, close) pass,
/// also between fragments. After a violation the close frame goes out, nothing more is
/// passed on, and the connection closes (``HTTP1ConnectionHandler/webSocketViolation(_:)``).
/// It also reports the channel's end and its writability to the connection, whose handler has
/// left the pipeline.
/// State: two counters and three bytes of a pending UTF-8 sequence. Used only on the
/// connection's event loop.
final class WebSocketMessageGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame

    private let connection: HTTP1ConnectionHandler
    /// The message being received: its bytes and frames so far, and (for text) its UTF-8 state.
    private var message: (bytes: Int, fragments: Int, utf8: UTF8Check?)?
    private var failed = false

    init(connection: HTTP1ConnectionHandler) {
        self.connection = connection
    }

    func channelInactive(context: ChannelHandlerContext) {
        connection.closedAfterUpgrade()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        connection.closedAfterUpgrade()
    }

    /// The socket's writability, for the connection's write-stall deadline (its handler has
    /// left the pipeline and no longer sees it).
    func channelWritabilityChanged(context: ChannelHandlerContext) {
        connection.webSocketWritabilityChanged(context.channel.isWritable)
        context.fireChannelWritabilityChanged()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if failed { return }
        let frame = unwrapInboundIn(data)
        guard connection.webSocketFrameReceived(masked: frame.maskKey != nil) else {
            failed = true
            message = nil
            return
        }
        switch frame.opcode {
        case .text, .binary:
            guard message == nil else { return fail(.protocolError, "websocket_protocol_error") }
            message = (0, 0, frame.opcode == .text ? UTF8Check() : nil)
        case .continuation:
            guard message != nil else { return fail(.protocolError, "websocket_protocol_error") }
        default:
            // Control frames, and reserved opcodes (which the WebSocket handler refuses).
            context.fireChannelRead(data)
            return
        }
        let length = frame.length
        message!.bytes += length
        message!.fragments += 1
        if message!.bytes > WebSocketLimits.maxMessageBytes || message!.fragments > WebSocketLimits.maxMessageFragments {
            return fail(.messageTooLarge, "websocket_message_too_large")
        }
        if message!.utf8 != nil {
            guard message!.utf8!.feed(frame.data.readableBytesView, mask: frame.maskKey),
                !frame.fin || message!.utf8!.isComplete
            else { return fail(.dataInconsistentWithMessage, "websocket_invalid_utf8") }
        }
        if frame.fin { message = nil }
        context.fireChannelRead(data)
    }

    private func fail(_ code: WebSocketErrorCode, _ reason: String) {
        failed = true
        message = nil
        HTTPMetrics.closed(reason).increment()
        connection.webSocketViolation(code)
    }
}

/// Checks UTF-8 fed in pieces (a character may be split across fragments): the bytes still
/// owed by the current character and the range its next byte must fall in (RFC 3629).
struct UTF8Check {
    private var remaining = 0
    private var lower: UInt8 = 0x80
    private var upper: UInt8 = 0xBF

    /// False at the first byte that cannot be UTF-8 here; `mask` unmasks as it reads.
    mutating func feed<Bytes: Collection<UInt8>>(_ bytes: Bytes, mask: WebSocketMaskingKey?) -> Bool {
        var offset = 0
        for raw in bytes {
            let byte = mask.map { raw ^ $0[offset & 3] } ?? raw
            offset &+= 1
            if remaining == 0 {
                switch byte {
                case 0x00...0x7F: continue
                case 0xC2...0xDF: remaining = 1
                case 0xE0: (remaining, lower) = (2, 0xA0)
                case 0xE1...0xEC, 0xEE...0xEF: remaining = 2
                case 0xED: (remaining, upper) = (2, 0x9F)
                case 0xF0: (remaining, lower) = (3, 0x90)
                case 0xF1...0xF3: remaining = 3
                case 0xF4: (remaining, upper) = (3, 0x8F)
                default: return false
                }
            } else {
                guard byte >= lower, byte <= upper else { return false }
                (lower, upper) = (0x80, 0xBF)
                remaining -= 1
            }
        }
        return true
    }

    /// No character is left unfinished.
    var isComplete: Bool { remaining == 0 }
}
