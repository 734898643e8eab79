import NIOCore

/// A whole WebSocket message: what a route writes (``WebSocketOutbound/write(_:)``) and what
/// ``WebSocketInbound/messages(maxSize:)`` collates from a client's frames.
public enum WebSocketMessage: Sendable, Equatable {
    case text(String)
    case binary(ByteBuffer)
}
