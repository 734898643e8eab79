import NIOWebSocket

/// Thrown out of a route's handler to end its session with `code` instead of 1011
/// (``WebSocketInbound/messages(maxSize:)`` throws it with 1009 for a message over its size).
public struct WebSocketCloseError: Error, Sendable, Equatable {
    public let code: WebSocketErrorCode

    public init(_ code: WebSocketErrorCode) {
        self.code = code
    }
}
