import NIOCore
import NIOWebSocket
import Yamux

/// Feeds a WebSocket's binary (and continuation) frames to a yamux session as one byte
/// stream — message boundaries mean nothing to yamux — answers pings, and ends the session
/// when the connection ends. Text frames break the protocol and close the connection.
final class WebSocketYamuxHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    let session: YamuxSession
    let writer: WebSocketFrameWriter
    let masking: Bool
    private var closeSent = false

    init(session: YamuxSession, writer: WebSocketFrameWriter, masking: Bool) {
        self.session = session
        self.writer = writer
        self.masking = masking
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .binary, .continuation:
            let bytes = frame.unmaskedBytes
            session.assumeIsolated { $0.receive(bytes) }
        case .ping:
            let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: masking ? .random() : nil, data: frame.wordUnmaskedData)
            writer.write(pong)
        case .pong:
            break
        case .connectionClose:
            // Answer the close (once) and hang up; yamux sees EOF.
            if !closeSent {
                closeSent = true
                var echo = context.channel.allocator.buffer(capacity: 2)
                echo.write(webSocketErrorCode: .normalClosure)
                let reply = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: masking ? .random() : nil, data: echo)
                let channel = context.channel
                let written = channel.eventLoop.makePromise(of: Void.self)
                writer.write(reply, promise: written)
                written.futureResult.whenComplete { _ in channel.close(promise: nil) }
            }
            session.assumeIsolated { $0.transportClosed() }
        default:
            session.assumeIsolated { $0.transportClosed() }
            context.close(promise: nil)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { session.assumeIsolated { $0.transportWritable() } }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        session.assumeIsolated { $0.transportClosed() }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        session.assumeIsolated { $0.transportClosed() }
        context.close(promise: nil)
    }
}
