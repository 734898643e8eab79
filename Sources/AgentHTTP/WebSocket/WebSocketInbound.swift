import NIOCore
import NIOWebSocket

/// What a WebSocket route reads: the client's data frames, in order, unmasked; the
/// session answers pings and the close handshake itself. The sequence ends when the client
/// closes, after a protocol error, or when the connection goes; iterating a task that is
/// cancelled ends it for that task only.
///
/// Bounded: frames wait in a buffer of at most ``WebSocketInboundBuffer/maxFrames`` frames
/// (``WebSocketInboundBuffer/maxBytes`` bytes); while it is full the connection is not read,
/// so a route that stops reading holds its client back (its pings too).
public struct WebSocketInbound: AsyncSequence, Sendable {
    public typealias Element = WebSocketDataFrame

    let buffer: WebSocketInboundBuffer

    public struct AsyncIterator: AsyncIteratorProtocol {
        let buffer: WebSocketInboundBuffer

        public mutating func next() async -> WebSocketDataFrame? {
            await buffer.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(buffer: buffer)
    }

    /// The client's messages, fragments joined; a message over `maxSize` bytes throws
    /// ``WebSocketCloseError`` with 1009, which closes the session with that code when the
    /// handler lets it out.
    public func messages(maxSize: Int) -> WebSocketInboundMessages {
        WebSocketInboundMessages(inbound: self, maxSize: maxSize)
    }
}

/// A client's whole messages (``WebSocketInbound/messages(maxSize:)``): each text or
/// binary frame with its continuations, at most `maxSize` bytes together.
public struct WebSocketInboundMessages: AsyncSequence, Sendable {
    public typealias Element = WebSocketMessage

    let inbound: WebSocketInbound
    let maxSize: Int

    public struct AsyncIterator: AsyncIteratorProtocol {
        var frames: WebSocketInbound.AsyncIterator
        let maxSize: Int

        public mutating func next() async throws -> WebSocketMessage? {
            guard let first = await frames.next() else { return nil }
            // The session lets no continuation without a message to continue through.
            guard first.opcode != .continuation else { throw WebSocketCloseError(.protocolError) }
            var data = first.data
            guard data.readableBytes <= maxSize else { throw WebSocketCloseError(.messageTooLarge) }
            var fin = first.fin
            while !fin {
                guard var frame = await frames.next() else { return nil }
                guard frame.opcode == .continuation else { throw WebSocketCloseError(.protocolError) }
                guard data.readableBytes + frame.data.readableBytes <= maxSize else { throw WebSocketCloseError(.messageTooLarge) }
                data.writeBuffer(&frame.data)
                fin = frame.fin
            }
            return first.opcode == .text ? .text(String(buffer: data)) : .binary(data)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(frames: inbound.makeAsyncIterator(), maxSize: maxSize)
    }
}
