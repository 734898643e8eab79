import NIOCore

/// A streamed request body: the connection's ``HTTPResponderHandler`` yields the body parts
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
        let handler: NIOLoopBound<HTTPResponderHandler>
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
    static func make(handler: NIOLoopBound<HTTPResponderHandler>, exchange: UInt64) -> (Producer, Source) {
        let made = Producer.makeSequence(
            elementType: ByteBuffer.self,
            backPressureStrategy: .init(lowWatermark: lowWatermark, highWatermark: highWatermark),
            finishOnDeinit: false,
            delegate: Delegate(handler: handler, exchange: exchange))
        return (made.sequence, made.source)
    }
}
