import NIOCore
import NIOHTTP1

/// Completes a promise with the answer's head and passes only its body and end on, so the
/// caller can read the status before it reads the body (NIO's decoder already drops
/// informational answers). The first error, or the end of the connection before a head,
/// fails the promise with that cause: the TLS check's, or the proxy's refusal.
final class ResponseHeadHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias InboundOut = HTTPClientResponsePart

    private let promise: EventLoopPromise<HTTPResponseHead>
    private let onHead: (@Sendable () -> Void)?
    private var waiting = true

    /// `onHead` runs on the loop when the head arrives, before the promise completes.
    init(promise: EventLoopPromise<HTTPResponseHead>, onHead: (@Sendable () -> Void)? = nil) {
        self.promise = promise
        self.onHead = onHead
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard waiting else { return context.fireChannelRead(data) }
        switch unwrapInboundIn(data) {
        case .head(let head) where head.status == .switchingProtocols:
            fail(context, CheckedHTTPError.unexpectedAnswer("101 Switching Protocols"))
        case .head(let head):
            waiting = false
            onHead?()
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
        settle(CheckedHTTPError.incompleteAnswer)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
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
