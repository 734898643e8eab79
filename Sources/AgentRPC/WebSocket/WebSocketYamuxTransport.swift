import NIOCore
import NIOWebSocket
import Yamux

/// A WebSocket channel as a yamux byte stream: each batch of frames leaves as one binary
/// message (masked on the client side, RFC 6455 §5.3). Runs on the channel's loop.
struct WebSocketYamuxTransport: YamuxTransport {
    let channel: any Channel
    let writer: NIOLoopBound<WebSocketFrameWriter>
    let masking: Bool

    func write(_ bytes: ByteBuffer) {
        writer.value.write(WebSocketFrame(fin: true, opcode: .binary, maskKey: masking ? .random() : nil, data: bytes))
    }

    var isWritable: Bool { channel.isWritable }

    /// Sends a normal-closure close frame, then closes the connection once it is written.
    func close() {
        var reason = channel.allocator.buffer(capacity: 2)
        reason.write(webSocketErrorCode: .normalClosure)
        let frame = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: masking ? .random() : nil, data: reason)
        let channel = self.channel
        let written = channel.eventLoop.makePromise(of: Void.self)
        writer.value.write(frame, promise: written)
        written.futureResult.whenComplete { _ in channel.close(promise: nil) }
    }
}

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

extension YamuxSession {
    /// Runs a new yamux session over an upgraded WebSocket channel. Call on the channel's
    /// event loop, after the upgrade installed the frame codec.
    ///
    /// - Parameter masking: true on the client side (RFC 6455 requires masked frames).
    public static func overWebSocket(
        _ channel: any Channel, role: Role, configuration: Configuration = Configuration()
    ) throws -> YamuxSession {
        let masking = role == .client
        let writer = try WebSocketFraming.installWriter(on: channel)
        let session = YamuxSession(
            role: role,
            transport: WebSocketYamuxTransport(
                channel: channel, writer: NIOLoopBound(writer, eventLoop: channel.eventLoop), masking: masking),
            eventLoop: channel.eventLoop, configuration: configuration)
        try channel.pipeline.syncOperations.addHandler(WebSocketYamuxHandler(session: session, writer: writer, masking: masking))
        return session
    }

}
