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
            // 1xx heads are informational: NIO's decoder passes them on; wait for the final one.
            guard head.status.code >= 200 else { return }
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
