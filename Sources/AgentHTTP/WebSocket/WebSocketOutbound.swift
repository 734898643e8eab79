import NIOCore
import NIOWebSocket

/// What a WebSocket route writes with: whole messages, one frame each, and its own close.
/// A write waits until NIO's writer takes the frame (which waits while the socket is full);
/// once a close frame went out (the route's, the session's, or the answer to the client's)
/// a write throws `ChannelError.outputClosed`.
public struct WebSocketOutbound: Sendable {
    let session: WebSocketSession

    public func write(_ message: WebSocketMessage) async throws {
        switch message {
        case .text(let text):
            try await session.write(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: text)))
        case .binary(let data):
            try await session.write(WebSocketFrame(fin: true, opcode: .binary, data: data))
        }
    }

    /// Sends a close frame with `code` and `reason` and ends the session's writing; the
    /// client has ``WebSocketSession/closeTimeout`` to answer. Nothing if a close already went out.
    public func close(_ code: WebSocketErrorCode, reason: String?) async throws {
        await session.close(code, reason: reason)
    }
}
