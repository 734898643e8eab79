import HTTPTypes
import HummingbirdCore
import NIOCore

/// Writes a response body to the connection through its ``HTTP1ConnectionHandler``.
/// Called in the handler task, normally on the loop already; a body that moved to another
/// executor is brought back to the loop first.
///
/// Three words (handler, executor, exchange with the flush flag in its low bit), so that the
/// `any ResponseBodyWriter` Hummingbird's body closure takes holds it inline: a larger writer
/// (`NIOLoopBound` alone is three words) costs a heap box per response.
struct ChannelBodyWriter: ResponseBodyWriter {
    private let handler: LoopBoundHandler
    /// The exchange number shifted left by one; the low bit asks for a flush per write.
    /// (The shift drops the exchange's top bit: 2^63 requests on one connection.)
    private let exchangeAndFlush: UInt64

    init(handler: LoopBoundHandler, exchange: UInt64, flushEachWrite: Bool) {
        self.handler = handler
        self.exchangeAndFlush = exchange << 1 | (flushEachWrite ? 1 : 0)
    }

    nonisolated(nonsending) mutating func write(_ buffer: ByteBuffer) async throws {
        let (exchange, flush) = (exchangeAndFlush >> 1, exchangeAndFlush & 1 == 1)
        if handler.executor.loop.inEventLoop {
            try await handler.value.writeBody(buffer, exchange: exchange, flush: flush)
        } else {
            let handler = handler
            try await withTaskExecutorPreference(handler.executor) {
                try await handler.value.writeBody(buffer, exchange: exchange, flush: flush)
            }
        }
    }

    nonisolated(nonsending) consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
        let exchange = exchangeAndFlush >> 1
        if handler.executor.loop.inEventLoop {
            handler.value.finishResponse(exchange: exchange, trailers: trailingHeaders)
        } else {
            let handler = handler
            await withTaskExecutorPreference(handler.executor) {
                handler.value.finishResponse(exchange: exchange, trailers: trailingHeaders)
            }
        }
    }
}

/// A connection's ``HTTP1ConnectionHandler`` with the executor of its event loop: two words
/// where `NIOLoopBound` takes three (it keeps the loop as an existential).
///
/// `@unchecked Sendable`, as `NIOLoopBound` is: the handler is only reachable through
/// ``value``, which traps unless called on the handler's loop (`executor.loop`), the one
/// thread that ever touches it.
struct LoopBoundHandler: @unchecked Sendable {
    private let handler: HTTP1ConnectionHandler
    let executor: EventLoopTaskExecutor

    /// Made on the handler's loop, with that loop's executor.
    init(_ handler: HTTP1ConnectionHandler, executor: EventLoopTaskExecutor) {
        executor.loop.assertInEventLoop()
        self.handler = handler
        self.executor = executor
    }

    /// The handler; only on its loop.
    var value: HTTP1ConnectionHandler {
        executor.loop.preconditionInEventLoop()
        return handler
    }
}

/// The bytes of a response body collected before its head is written (one response, one
/// task: never shared). At most `limit` bytes: a body that writes more than that fails.
final class CollectedBody {
    let limit: Int
    private(set) var bytes = ByteBuffer()

    init(limit: Int) {
        self.limit = limit
    }

    /// Appends `buffer` (the first is kept as it is, without a copy).
    func append(_ buffer: ByteBuffer) throws(BodyTooLarge) {
        guard bytes.readableBytes + buffer.readableBytes <= limit else { throw BodyTooLarge(limit: limit) }
        if bytes.readableBytes == 0 {
            bytes = buffer
        } else {
            var buffer = buffer
            bytes.writeBuffer(&buffer)
        }
    }

    /// A body longer than it may be collected.
    struct BodyTooLarge: Error, CustomStringConvertible {
        var limit: Int
        var description: String { "a response body declared at most \(limit) bytes wrote more" }
    }

    /// A body that wrote another length than it declared.
    struct LengthMismatch: Error, CustomStringConvertible {
        var declared: Int
        var written: Int
        var description: String { "a response body declared \(declared) bytes and wrote \(written)" }
    }
}

/// Collects a response body into a ``CollectedBody`` instead of writing it; trailers are
/// dropped, as a body of a declared length has no place for them.
struct CollectingBodyWriter: ResponseBodyWriter {
    let into: CollectedBody

    nonisolated(nonsending) mutating func write(_ buffer: ByteBuffer) async throws {
        try into.append(buffer)
    }

    nonisolated(nonsending) consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
