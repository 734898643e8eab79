import NIOCore
import Synchronization

/// A streamed request body: the connection's ``HTTP1ConnectionHandler`` yields the body parts
/// as they arrive, the route handler reads them as an async sequence.
///
/// Back pressure: once ``highWatermark`` parts wait unread, `yield` says stop and the
/// handler holds the channel's reads; when the reader has drained to ``lowWatermark`` the
/// handler reads again. At most `highWatermark` parts (each at most one socket read) are
/// buffered per request.
enum RequestBodyStream {
    static let lowWatermark = 2
    static let highWatermark = 8

    typealias Producer = NIOThrowingAsyncSequenceProducer<
        ByteBuffer, any Error, NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark, Delegate
    >
    typealias Source = Producer.Source

    /// Tells the handler, on its loop, that the reader wants more or has gone.
    struct Delegate: NIOAsyncSequenceProducerDelegate {
        let handler: NIOLoopBound<HTTP1ConnectionHandler>
        /// The request this body belongs to (the handler may be on a later one by then).
        let exchange: UInt64

        func produceMore() {
            let (handler, exchange) = (self.handler, self.exchange)
            handler.eventLoop.execute { handler.value.bodyWantsMore(exchange: exchange) }
        }

        func didTerminate() {
            let (handler, exchange) = (self.handler, self.exchange)
            handler.eventLoop.execute { handler.value.bodyAbandoned(exchange: exchange) }
        }
    }

    /// A body sequence and its source.
    static func make(handler: NIOLoopBound<HTTP1ConnectionHandler>, exchange: UInt64) -> (Body, Source) {
        let made = Producer.makeSequence(
            elementType: ByteBuffer.self,
            backPressureStrategy: .init(lowWatermark: lowWatermark, highWatermark: highWatermark),
            finishOnDeinit: false,
            delegate: Delegate(handler: handler, exchange: exchange))
        return (Body(made.sequence), made.source)
    }

    /// The body as its handler reads it: one pass. NIO's producer stops the process when a
    /// second iterator is made; here a second reader finds the body empty, as with
    /// Hummingbird's own request bodies.
    struct Body: AsyncSequence, Sendable {
        typealias Element = ByteBuffer

        private let producer: Producer
        private let iterated = Once()

        init(_ producer: Producer) { self.producer = producer }

        func makeAsyncIterator() -> Iterator {
            Iterator(iterated.take() ? producer.makeAsyncIterator() : nil)
        }

        struct Iterator: AsyncIteratorProtocol {
            private var base: Producer.AsyncIterator?

            init(_ base: Producer.AsyncIterator?) { self.base = base }

            mutating func next() async throws -> ByteBuffer? {
                try await base?.next()
            }
        }
    }

    /// True for the first `take` only.
    final class Once: Sendable {
        private let taken = Atomic(false)

        func take() -> Bool { !taken.exchange(true, ordering: .relaxed) }
    }
}
