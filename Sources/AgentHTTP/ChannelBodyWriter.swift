import HTTPTypes
import HummingbirdCore
import NIOCore

/// Writes a response body to the connection through its ``HTTPResponderHandler``.
/// Called in the handler task, normally on the loop already; a body that moved to another
/// executor is brought back to the loop first.
struct ChannelBodyWriter: ResponseBodyWriter {
    let handler: NIOLoopBound<HTTPResponderHandler>
    let exchange: UInt64
    let executor: EventLoopTaskExecutor
    let flushEachWrite: Bool

    mutating func write(_ buffer: ByteBuffer) async throws {
        if handler.eventLoop.inEventLoop {
            try await handler.value.writeBody(buffer, exchange: exchange, flush: flushEachWrite)
        } else {
            let (handler, exchange, flush) = (handler, exchange, flushEachWrite)
            try await withTaskExecutorPreference(executor) {
                try await handler.value.writeBody(buffer, exchange: exchange, flush: flush)
            }
        }
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
        if handler.eventLoop.inEventLoop {
            handler.value.finishResponse(exchange: exchange, trailers: trailingHeaders)
        } else {
            let (handler, exchange) = (handler, exchange)
            await withTaskExecutorPreference(executor) {
                handler.value.finishResponse(exchange: exchange, trailers: trailingHeaders)
            }
        }
    }
}
