import NIOCore

/// Watches a connection for the client going away (half-close, close or error).
///
/// Added to every HTTP/1 connection's pipeline; ``AgentRequestContext/clientGone`` finds it.
/// State is only touched on the channel's event loop.
final class ConnectionObserver: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    typealias InboundOut = NIOAny

    private var promise: EventLoopPromise<Void>?
    private var futureStorage: EventLoopFuture<Void>?

    /// Completed once the client has gone.
    var gone: EventLoopFuture<Void> { futureStorage! }

    func handlerAdded(context: ChannelHandlerContext) {
        let promise = context.eventLoop.makePromise(of: Void.self)
        self.promise = promise
        self.futureStorage = promise.futureResult
        context.channel.closeFuture.whenComplete { _ in promise.succeed(()) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        // Removed on WebSocket upgrade: the close future above still completes the promise.
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            promise?.succeed(())
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise?.succeed(())
        context.fireErrorCaught(error)
    }
}

// The handler is created per connection and only used on that connection's event loop.
extension ConnectionObserver: @unchecked Sendable {}
