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

    func close() {
        writer.value.closeAndHangUp(masking: masking)
    }
}
