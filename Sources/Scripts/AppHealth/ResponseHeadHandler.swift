import NIOCore
import NIOHTTP1

/// Sends the request when the connection is up and completes `promise` with the response
/// head (or the error, or the connection's end); the body is never read.
final class ResponseHeadHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let request: HTTPRequestHead
    private let promise: EventLoopPromise<HTTPResponseHead>

    init(request: HTTPRequestHead, promise: EventLoopPromise<HTTPResponseHead>) {
        self.request = request
        self.promise = promise
    }

    func channelActive(context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(.head(request)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data) {
            // 1xx heads but 101 are informational: wait for the final one. A 101 is final (as
            // to Go's transport, whose checker then calls the app healthy).
            guard head.status.code >= 200 || head.status.code == 101 else { return }
            promise.succeed(head)
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(AppHealthProbe.RequestFailure(description: "connection closed before a response"))
        context.fireChannelInactive()
    }
}
