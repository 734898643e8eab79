import NIOCore
import NIOHTTP1

/// Completes the current request's promise with its answer's head and passes only the body
/// and end on, so the caller can read the status before it reads the body (NIO's decoder
/// already drops informational answers). The first error, or the end of the connection before
/// a head, fails the promise with that cause: the TLS check's, or the proxy's refusal. It also
/// owns the request's deadline, on the event loop: at it the connection closes, unless the
/// head came first and the deadline was the head's only, or the whole answer came; no timer
/// outlives its request or the connection. A kept-alive connection gives it each request in
/// turn (``begin(promise:deadline:headOnly:expired:)``).
final class ResponseHeadHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias InboundOut = HTTPClientResponsePart

    private var context: ChannelHandlerContext?
    private var promise: EventLoopPromise<HTTPResponseHead>?
    private var headOnly = false
    private var timer = ChannelDeadline()

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    /// The next request's answer (on the loop, once the previous answer ended): its head
    /// completes `promise`; at `deadline` the connection closes, `expired` called first, unless
    /// the head came first and `headOnly`, or the whole answer came.
    func begin(promise: EventLoopPromise<HTTPResponseHead>, deadline: NIODeadline, headOnly: Bool, expired: @escaping @Sendable () -> Void) {
        guard let context else {
            promise.fail(CheckedHTTPError.incompleteAnswer)
            return
        }
        settle(CheckedHTTPError.incompleteAnswer)
        self.promise = promise
        self.headOnly = headOnly
        timer.stop()
        timer.start(context, at: deadline, expired: expired)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let promise else {
            // The whole answer came in time (a cut one ends only after the close, which a
            // deadline records first).
            if case .end = unwrapInboundIn(data) { timer.stop() }
            return context.fireChannelRead(data)
        }
        switch unwrapInboundIn(data) {
        case .head(let head) where head.status == .switchingProtocols:
            fail(context, CheckedHTTPError.unexpectedAnswer("101 Switching Protocols"))
        case .head(let head):
            self.promise = nil
            if headOnly { timer.stop() }
            promise.succeed(head)
        case .body, .end:
            fail(context, CheckedHTTPError.unexpectedAnswer("a body before the status line"))
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard promise != nil else { return context.fireErrorCaught(error) }
        fail(context, error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer.stop()
        settle(CheckedHTTPError.incompleteAnswer)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer.stop()
        settle(CheckedHTTPError.incompleteAnswer)
        self.context = nil
    }

    private func fail(_ context: ChannelHandlerContext, _ error: any Error) {
        settle(error)
        // Through the channel, so the last handler marks the connection closing.
        context.channel.close(promise: nil)
    }

    private func settle(_ error: any Error) {
        promise?.fail(error)
        promise = nil
    }
}
