import NIOCore
import NIOWebSocket

/// Carries a DERP byte stream in WebSocket binary messages: inbound, the payloads of
/// binary (and continuation) messages become plain bytes — boundaries mean nothing, a
/// frame may be split over messages or several share one; outbound, each write becomes
/// one binary message (masked on the client side; ``CoalescingWriter`` keeps the frames it
/// merges under 16 KiB a write, so a message stays under a peer's 32 KiB read limit).
/// Pings are answered (a few answers at most wait unwritten); a close is answered and ends the connection; text messages break the
/// protocol and close it.
public final class DERPWebSocketAdapter: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = WebSocketFrame
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = WebSocketFrame

    private let masking: Bool
    private var closeSent = false
    /// Pongs not yet written (at most ``PingAnswers/maxUnwritten``).
    private let pings = PingAnswers()

    /// - Parameter masking: true on the client side (RFC 6455 masks client frames).
    public init(masking: Bool) {
        self.masking = masking
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Once a close is sent (answering the relay's, or for a frame that breaks the
        // protocol), nothing more is read: frames that came in the same read as the close
        // would otherwise still reach the DERP side, frames in a later read not.
        guard !closeSent else { return }
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .binary, .continuation:
            context.fireChannelRead(wrapInboundOut(frame.unmaskedData))
        case .ping:
            let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: maskKey, data: frame.unmaskedData)
            // A relay that pings and reads nothing gets no more than a few answers queued.
            _ = pings.send(wrapOutboundOut(pong), context: context)
        case .pong:
            break
        case .connectionClose:
            sendClose(context: context, code: .normalClosure)
        default:
            sendClose(context: context, code: .unacceptableData)
        }
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let bytes = unwrapOutboundIn(data)
        context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .binary, maskKey: maskKey, data: bytes)), promise: promise)
    }

    /// Sends a close frame with `code` (once), then closes the connection.
    public func sendClose(context: ChannelHandlerContext, code: WebSocketErrorCode) {
        guard !closeSent else { return }
        closeSent = true
        var reason = context.channel.allocator.buffer(capacity: 2)
        reason.write(webSocketErrorCode: code)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: maskKey, data: reason)))
            .whenComplete { _ in channel.close(promise: nil) }
    }

    private var maskKey: WebSocketMaskingKey? { masking ? .random() : nil }
}
