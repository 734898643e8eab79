import NIOCore
import NIOWebSocket
import Yamux

/// Feeds a WebSocket's binary (and continuation) frames to a yamux session as one byte
/// stream — message boundaries mean nothing to yamux — answers pings, and ends the session
/// when the connection ends. Text frames break the protocol and close the connection.
final class WebSocketYamuxHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame

    let session: YamuxSession
    let writer: WebSocketFrameWriter
    let masking: Bool

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
            // Answer the close and hang up; yamux sees EOF.
            writer.closeAndHangUp(masking: masking)
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
