import Logging
import NIOCore
import NIOWebSocket

/// The HTTP layer's own handling of raw client bytes, for the fuzz targets (`Fuzz/`,
/// `make fuzz`): the WebSocket frame mask check and the connection guards in front of the
/// routes. It exists for the fuzz targets only.
public enum HTTPFuzzing {
    /// Feeds `chunks` of client bytes to what an upgraded connection runs on them: NIO's
    /// frame decoder (the agent's frame limit) and the mask check ``WebSocketMessageGuard``
    /// makes of its frames, installed on `channel` (an `EmbeddedChannel`). False once
    /// a complete frame without the mask bit was read; the decoder's own refusals (a frame
    /// over the limit, a fragmented or long control frame) end the reading with true.
    public static func maskCheck(_ chunks: [[UInt8]], on channel: any Channel) -> Bool {
        let verdict = MaskVerdict()
        do {
            let decoder = ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: WebSocketLimits.maxFrameBytes))
            try channel.pipeline.syncOperations.addHandlers([decoder, verdict])
        } catch {
            return true
        }
        for chunk in chunks where verdict.reading {
            channel.pipeline.syncOperations.fireChannelRead(NIOAny(ByteBuffer(bytes: chunk)))
        }
        return verdict.masked
    }

    /// Installs on `channel` (an `EmbeddedChannel`) what every connection gets, as
    /// ``AgentHTTPChannel`` does: NIO's HTTP/1 encoder, ``HTTP1RequestDecoder`` with the
    /// agent's limits, and ``HTTP1ConnectionHandler`` serving the routes of a server with no
    /// module mounted (`/healthz`; anything else is a JSON 404).
    public static func installConnection(on channel: any Channel, registry: HTTPConnectionRegistry) throws {
        var logger = Logger(label: "fuzz")
        logger.logLevel = .critical
        let serving = AgentHTTPServing(mounts: [], connections: registry, accessLog: false, logger: logger)
        _ = try serving.childChannel.setup(channel: channel, logger: logger).wait()
    }
}

extension HTTPFuzzing {
    /// The router's trie of `patterns` (`/a/:id`, `/a/{id}`), asked for `path`: the index of
    /// the pattern it resolves to (the first of equal ones) and its captures (name and byte
    /// range of `path`); nil when the patterns cannot be built into a trie (two capture names
    /// at one place). `.some(nil)`: the path resolves to nothing.
    public static func route(
        _ path: String, among patterns: [String]
    ) -> (index: Int, captures: [(name: String, range: Range<Int>)])?? {
        guard let trie = try? RouteTrie(patterns.enumerated().map { (RouteTrie<Int>.components($0.element), $0.offset) }) else {
            return nil
        }
        guard let found = trie.resolve(Substring(path)) else { return .some(nil) }
        return .some((found.value, found.captures.map { (String($0.name), $0.range) }))
    }
}

/// The mask check's verdict on the frames of ``HTTPFuzzing/maskCheck(_:on:)``.
private final class MaskVerdict: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame

    private(set) var masked = true
    private(set) var reading = true

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard reading, unwrapInboundIn(data).maskKey == nil else { return }
        masked = false
        reading = false
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        reading = false
    }
}
