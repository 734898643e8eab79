import Logging
import NIOCore

/// The HTTP layer's own handling of raw client bytes, for the fuzz targets (`Fuzz/`,
/// `make fuzz`): the WebSocket mask check and the connection guards in front of the
/// routes. It exists for the fuzz targets only.
public enum HTTPFuzzing {
    /// Feeds `chunks` to the check ``ConnectionBytesHandler`` runs on an upgraded connection;
    /// false once a client frame without the mask bit was seen.
    public static func maskCheck(_ chunks: [[UInt8]]) -> Bool {
        var check = WebSocketMaskCheck()
        for chunk in chunks where !check.feed(chunk) { return false }
        return true
    }

    /// Installs on `channel` (an `EmbeddedChannel`) what every connection gets, as
    /// ``AgentHTTPChannel`` does: ``ConnectionBytesHandler``, NIO's HTTP/1 codec with the
    /// agent's limits, and ``HTTP1ConnectionHandler`` serving the routes of a server with no
    /// module mounted (`/healthz`; anything else is a JSON 404).
    public static func installConnection(on channel: any Channel, registry: HTTPConnectionRegistry) throws {
        var logger = Logger(label: "fuzz")
        logger.logLevel = .critical
        let serving = AgentHTTPServing(mounts: [], connections: registry, accessLog: false, logger: logger)
        _ = try serving.childChannel.setup(channel: channel, logger: logger).wait()
    }
}
