import NIOCore
import NIOHTTP1

/// Completes a promise with the answer's head and passes only its body and end on, so the
/// caller can read the status before it reads the body (NIO's decoder already drops
/// informational answers). The first error, or the end of the connection before a head,
/// fails the promise with that cause: the TLS check's, or the proxy's refusal. It also owns
/// the request's deadline, on the event loop: at it the connection closes, unless the head
/// came first and the deadline was the head's only; no timer outlives the connection.
final class ResponseHeadHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias InboundOut = HTTPClientResponsePart

    private let promise: EventLoopPromise<HTTPResponseHead>
    private let deadline: NIODeadline
    private let headOnly: Bool
    private let expired: @Sendable () -> Void
    private var timer = ChannelDeadline()
    private var waiting = true

    /// - Parameters:
    ///   - deadline: when the connection closes, `expired` called first.
    ///   - headOnly: whether the deadline ends as the head arrives.
    init(promise: EventLoopPromise<HTTPResponseHead>, deadline: NIODeadline, headOnly: Bool, expired: @escaping @Sendable () -> Void) {
        self.promise = promise
        self.deadline = deadline
        self.headOnly = headOnly
        self.expired = expired
    }

    func handlerAdded(context: ChannelHandlerContext) {
        timer.start(context, at: deadline, expired: expired)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard waiting else {
            // The whole answer came in time (a cut one ends only after the close, which a
            // deadline records first).
            if case .end = unwrapInboundIn(data) { timer.stop() }
            return context.fireChannelRead(data)
        }
        switch unwrapInboundIn(data) {
        case .head(let head) where head.status == .switchingProtocols:
            fail(context, CheckedHTTPError.unexpectedAnswer("101 Switching Protocols"))
        case .head(let head):
            waiting = false
            if headOnly { timer.stop() }
            promise.succeed(head)
        case .body, .end:
            fail(context, CheckedHTTPError.unexpectedAnswer("a body before the status line"))
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard waiting else { return context.fireErrorCaught(error) }
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
    }

    private func fail(_ context: ChannelHandlerContext, _ error: any Error) {
        settle(error)
        context.close(promise: nil)
    }

    private func settle(_ error: any Error) {
        guard waiting else { return }
        waiting = false
        promise.fail(error)
    }
}
