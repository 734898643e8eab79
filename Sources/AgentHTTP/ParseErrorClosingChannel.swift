import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOHTTP1

/// Hummingbird's HTTP/1 + WebSocket-upgrade channel, plus one handler at the end of each
/// connection's pipeline that closes the connection when its bytes are not HTTP.
///
/// Without it, a malformed first request leaves the connection open and silent until the
/// idle timeout (the upgrade handler swallows the parse error).
struct ParseErrorClosingChannel<Inner: ServerChildChannel>: ServerChildChannel {
    let inner: Inner

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Inner.Value> {
        inner.setup(channel: channel, logger: logger).flatMapThrowing { value in
            try channel.pipeline.syncOperations.addHandler(ParseErrorCloser())
            return value
        }
    }

    func handle(value: Inner.Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }
}

/// Closes the connection on an HTTP parse error.
final class ParseErrorCloser: ChannelInboundHandler, Sendable {
    typealias InboundIn = NIOAny

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is HTTPParserError {
            context.close(promise: nil)
        }
        context.fireErrorCaught(error)
    }
}

extension HTTPServerBuilder {
    /// `http1WebSocketUpgrade` whose connections close on malformed HTTP.
    static func http1WebSocketUpgradeClosingOnParseErrors(
        webSocketRouter: Router<AgentRequestContext>,
        configuration: HTTP1WebSocketUpgradeChannel.Configuration
    ) -> HTTPServerBuilder {
        let webSocketResponder = webSocketRouter.buildResponder()
        return HTTPServerBuilder { responder in
            ParseErrorClosingChannel(
                inner: HTTP1WebSocketUpgradeChannel(
                    responder: responder,
                    webSocketResponder: webSocketResponder,
                    configuration: configuration))
        }
    }
}
