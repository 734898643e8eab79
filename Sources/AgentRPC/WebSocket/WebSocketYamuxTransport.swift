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
