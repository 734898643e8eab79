import NIOCore
import NIOHTTP1

/// The HTTP layer's own handling of raw client bytes, for the fuzz targets (`Fuzz/`,
/// `make fuzz`): the WebSocket mask check and the connection guards in front of the
/// routes. It exists for the fuzz targets only.
public enum HTTPFuzzing {
    /// Feeds `chunks` to the check ``ConnectionGuard`` runs on an upgraded connection;
    /// false once a client frame without the mask bit was seen.
    public static func maskCheck(_ chunks: [[UInt8]]) -> Bool {
        var check = WebSocketMaskCheck()
        for chunk in chunks where !check.feed(chunk) { return false }
        return true
    }

    /// Installs on `channel` (an `EmbeddedChannel`) what every connection gets in front of
    /// its routes, as ``AgentHTTPChannel`` does: ``ConnectionGuard`` first, NIO's HTTP/1
    /// codec with the agent's limits, ``HTTPRequestGuard`` after the decoder; last, a
    /// stand-in for the routes that answers each request 200 with its body's length once
    /// the request ended. No WebSocket route is installed.
    public static func installConnection(on channel: any Channel, registry: HTTPConnectionRegistry) throws {
        let pipeline = channel.pipeline.syncOperations
        var limits = NIOHTTPDecoderLimitConfiguration()
        limits.maxHeaderFieldSize = AgentHTTPLimits.maxHeaderFieldSize
        limits.maxHeaderListSize = AgentHTTPLimits.maxHeaderListSize
        limits.maxHeaderFieldCount = AgentHTTPLimits.maxHeaderFieldCount
        let connection = ConnectionGuard(registry: registry)
        let decoder = ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes, limitConfiguration: limits))
        try pipeline.addHandler(connection)
        try pipeline.addHandler(HTTPResponseEncoder())
        try pipeline.addHandler(decoder)
        try pipeline.addHandler(HTTPRequestGuard(connection: connection, webSocketRoutes: WebSocketRouteTable([]), limits: .init()))
        try pipeline.addHandler(StandInResponder())
    }

    /// Answers every request 200 with a JSON count of its body bytes, when its end arrives.
    private final class StandInResponder: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        private var bodyBytes = 0

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head:
                bodyBytes = 0
            case .body(let buffer):
                bodyBytes += buffer.readableBytes
            case .end:
                let body = ByteBuffer(string: "{\"body_bytes\":\(bodyBytes)}")
                var headers = HTTPHeaders()
                headers.add(name: "Content-Length", value: String(body.readableBytes))
                context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
                context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }
}
