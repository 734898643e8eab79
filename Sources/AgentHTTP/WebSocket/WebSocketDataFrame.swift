import NIOCore

/// A client's data frame as a route reads it from ``WebSocketInbound``: already unmasked,
/// control frames (ping, pong, close) answered by the session and never seen here.
public struct WebSocketDataFrame: Sendable, Equatable {
    public enum Opcode: Sendable, Equatable {
        case text
        case binary
        /// A further fragment of the message the last `.text` or `.binary` frame began.
        case continuation
    }

    public var opcode: Opcode
    public var data: ByteBuffer
    /// The message's last frame.
    public var fin: Bool

    public init(opcode: Opcode, data: ByteBuffer, fin: Bool) {
        self.opcode = opcode
        self.data = data
        self.fin = fin
    }
}
