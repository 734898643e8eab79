import NIOCore
import NIOHTTP1
import Synchronization

/// The last handler of a request's connection: hands the current request's answer (its body
/// parts and end; ``ResponseHeadHandler`` takes the head) to the reader's stream, with
/// backpressure (reads stop while ``CheckedHTTPClient/maxQueuedParts`` parts wait), and
/// marks when the answer arrived whole (``StreamEnd``), so a kept-alive connection can serve
/// the next request. Between requests the connection is idle: it keeps reading, so the
/// server's close is seen at once, and anything the server sends unasked closes it. Every
/// close that passes it (or that it makes) is marked at once in ``closing``, before a TLS
/// close has waited for the server's `close_notify`, so the pool never hands such a
/// connection out.
final class AnswerStreamHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    typealias Producer = NIOThrowingAsyncSequenceProducer<
        HTTPClientResponsePart, any Error, NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark, Delegate
    >

    private var context: ChannelHandlerContext?
    /// The current request's stream and its end mark; nil while the connection is idle.
    private var source: Producer.Source?
    private var ended: StreamEnd?
    private var producing = true
    /// A read the channel asked for while the reader had enough.
    private var heldRead = false
    /// The current request's number: a finished request's reader, waking late, concerns no
    /// later one.
    private var generation = 0
    /// Set once the connection began to close.
    let closing = ClosingMark()

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        end(CheckedHTTPError.incompleteAnswer)
        self.context = nil
    }

    /// A request's stream, made on any thread: ``begin(_:generation:ended:)`` then feeds
    /// `source` on the loop. `generation` is the request's number (unique in the process).
    static func stream(for handler: NIOLoopBound<AnswerStreamHandler>, generation: Int) -> (Producer, Producer.Source, StreamEnd) {
        let ended = StreamEnd()
        let made = Producer.makeSequence(
            backPressureStrategy: .init(lowWatermark: 2, highWatermark: CheckedHTTPClient.maxQueuedParts), finishOnDeinit: false,
            delegate: Delegate(handler: handler, generation: generation, ended: ended))
        return (made.sequence, made.source, ended)
    }

    /// A new request's answer goes to `source` (on the loop); a connection already gone ends
    /// it at once.
    func begin(_ source: Producer.Source, generation: Int, ended: StreamEnd) {
        end(CheckedHTTPError.incompleteAnswer)
        guard context != nil else {
            source.finish(CheckedHTTPError.incompleteAnswer)
            return
        }
        self.generation = generation
        self.source = source
        self.ended = ended
        producing = true
        releaseHeldRead()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        guard let source else {
            // Idle: the server has nothing to say until asked.
            close(context)
            return
        }
        if case .end = part {
            // Marked before the reader can see the end, so that once it has, the connection
            // is known to be whole. (A reader gone by now left an answer that arrived whole: the
            // connection is clean all the same.)
            ended?.mark()
            ended = nil
            _ = source.yield(part)
            source.finish()
            self.source = nil
            producing = true
            releaseHeldRead()
            return
        }
        switch source.yield(part) {
        case .produceMore: break
        case .stopProducing: producing = false
        case .dropped:
            // The reader is gone before the answer ended: the connection serves no one else.
            self.source = nil
            ended = nil
            close(context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        end(error)
        close(context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        closing.mark()
        end(CheckedHTTPError.incompleteAnswer)
        context.fireChannelInactive()
    }

    /// A close from outside (`channel.close`, a deadline's timer, a cancellation) or from a
    /// handler that closes through the channel.
    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode == .all { closing.mark() }
        context.close(mode: mode, promise: promise)
    }

    private func close(_ context: ChannelHandlerContext) {
        closing.mark()
        context.close(promise: nil)
    }

    func read(context: ChannelHandlerContext) {
        if source != nil, !producing {
            heldRead = true
        } else {
            context.read()
        }
    }

    /// Ends the current stream, if any, with `error` (parts already queued are still read).
    private func end(_ error: any Error) {
        source?.finish(error)
        source = nil
        ended = nil
    }

    private func releaseHeldRead() {
        guard heldRead, let context else { return }
        heldRead = false
        context.read()
    }

    /// The reader wants more, or is gone (on any thread: each hops to the loop).
    struct Delegate: NIOAsyncSequenceProducerDelegate {
        let handler: NIOLoopBound<AnswerStreamHandler>
        let generation: Int
        let ended: StreamEnd

        func produceMore() {
            handler.eventLoop.execute {
                let handler = self.handler.value
                guard handler.generation == generation else { return }
                handler.producing = true
                handler.releaseHeldRead()
            }
        }

        func didTerminate() {
            // An answer that ended whole needs nothing of the loop (no wake-up of its thread).
            guard !ended.marked else { return }
            handler.eventLoop.execute {
                // Gone before its answer ended (the stream ends whole otherwise): close.
                let handler = self.handler.value
                guard handler.generation == generation, handler.source != nil, let context = handler.context else { return }
                handler.source = nil
                handler.close(context)
            }
        }
    }
}

/// Set on the loop when a request's answer arrived whole, with the time, before its stream
/// finishes: the reader's side then knows without a hop to the loop, and the pool counts the
/// connection idle from then.
final class StreamEnd: Sendable {
    /// `NIODeadline`'s uptime nanoseconds, 0 until marked.
    private let time = Atomic<UInt64>(0)
    var marked: Bool { time.load(ordering: .acquiring) != 0 }
    /// When the answer arrived whole, if it did.
    var at: NIODeadline? {
        let nanoseconds = time.load(ordering: .acquiring)
        return nanoseconds == 0 ? nil : .uptimeNanoseconds(nanoseconds)
    }
    func mark() { time.store(max(1, NIODeadline.now().uptimeNanoseconds), ordering: .releasing) }
}

/// Set once a connection began to close (read from any thread).
final class ClosingMark: Sendable {
    private let closing = Atomic(false)
    var marked: Bool { closing.load(ordering: .acquiring) }
    func mark() { closing.store(true, ordering: .releasing) }
}
