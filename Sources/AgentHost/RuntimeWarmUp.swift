import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOWebSocket
import Synchronization

/// Instantiates NIOHTTP1's pipeline types on one thread before the event loops start.
///
/// At start-up the HTTP server, the control-plane dial and the REST client set up HTTP
/// pipelines on different event loops at once, and each first set-up instantiates the same
/// generic metadata (`HTTPPart`, `HTTPDecoder`, `ByteToMessageHandler`) and checks its
/// conformances. The Swift runtime crashed there in four loaded test runs (a null metadata
/// in `swift_conformsToProtocolMaybeInstantiateSuperclasses`: docs/benchmarks.md). Done here
/// first, on an embedded channel, the later set-ups find that metadata complete and NIO's
/// call sites their type caches filled. It costs about a millisecond, once.
public enum RuntimeWarmUp {
    /// Runs a request and a response through a client pipeline (with the WebSocket upgrade,
    /// not taken) and a server pipeline; whether both ran their whole exchange.
    @discardableResult
    public static func httpPipelines() -> Bool {
        let client = EmbeddedChannel()
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/")
        head.headers.add(name: "Host", value: "localhost")
        let upgrader = NIOTypedWebSocketClientUpgrader<Bool>(upgradePipelineHandler: { channel, _ in
            channel.eventLoop.makeSucceededFuture(true)
        })
        let configuration = NIOTypedHTTPClientUpgradeConfiguration<Bool>(
            upgradeRequestHead: head, upgraders: [upgrader],
            notUpgradingCompletionHandler: { channel in channel.eventLoop.makeSucceededFuture(false) })
        // The outcome is read from its callback, never waited for: an embedded future that
        // never completes would block this thread for good. The response is fed only after
        // the request went out (NIO's decoder traps on a response without a request).
        let outcome = Mutex<Bool?>(nil)
        if let upgraded = try? client.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(
            configuration: .init(upgradeConfiguration: configuration)),
            (try? client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()) != nil,
            (try? client.readOutbound(as: ByteBuffer.self)) != nil
        {
            upgraded.whenComplete { result in outcome.withLock { $0 = (try? result.get()) ?? true } }
            _ = try? client.writeInbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        }
        _ = try? client.finish(acceptAlreadyClosed: true)
        let clientRan = outcome.withLock { $0 } == false

        let server = EmbeddedChannel()
        try? server.pipeline.syncOperations.configureHTTPServerPipeline()
        _ = try? server.writeInbound(ByteBuffer(string: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok"))
        var serverRan = false
        if case .head(let request) = try? server.readInbound(as: HTTPServerRequestPart.self) { serverRan = request.uri == "/" }
        _ = try? server.writeOutbound(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .ok)))
        _ = try? server.writeOutbound(HTTPServerResponsePart.end(nil))
        serverRan = serverRan && (try? server.readOutbound(as: ByteBuffer.self))?.readableBytes ?? 0 > 0
        _ = try? server.finish(acceptAlreadyClosed: true)
        return clientRan && serverRan
    }
}
