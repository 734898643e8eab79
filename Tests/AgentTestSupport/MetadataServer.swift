import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A cloud's instance metadata service for tests: plain HTTP on 127.0.0.1, each request
/// recorded and answered by the test's handler (an answer, silence, or bytes that are not HTTP).
public final class MetadataServer: Sendable {
    public enum Answer: Sendable {
        case respond(status: Int, body: String)
        /// Never answers (the connection stays open until the client gives up).
        case hang
        /// Writes these bytes instead of an HTTP response, then closes.
        case garbage([UInt8])
    }

    public struct Request: Sendable {
        public var method: String
        public var uri: String
        public var headers: [(name: String, value: String)]
        /// When it arrived.
        public var at: ContinuousClock.Instant = .now

        public func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }
    }

    /// The handler and what was received, shared with the connections' handlers.
    private final class State: Sendable {
        let handler: Mutex<@Sendable (Request) -> Answer>
        let received = Mutex<[Request]>([])
        init(_ handler: @escaping @Sendable (Request) -> Answer) { self.handler = Mutex(handler) }
    }

    private let channel: any Channel
    private let state: State

    /// `host:port`, what the metadata-host variables take.
    public var host: String { "127.0.0.1:\(channel.localAddress?.port ?? 0)" }
    public var requests: [Request] { state.received.withLock { $0 } }

    public init(_ handler: @escaping @Sendable (Request) -> Answer) async throws {
        let state = State(handler)
        self.state = state
        let answer: @Sendable (Request) -> Answer = { request in
            state.received.withLock { $0.append(request) }
            return state.handler.withLock { $0 }(request)
        }
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)))
                    try channel.pipeline.syncOperations.addHandler(MetadataRequestHandler(answer: answer))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    /// Answers with `handler` from now on.
    public func answer(_ handler: @escaping @Sendable (Request) -> Answer) {
        state.handler.withLock { $0 = handler }
    }

    /// What the handler answers `request`, without recording it (a test forwarding to an honest service).
    public func answer(for request: Request) -> Answer {
        state.handler.withLock { $0 }(request)
    }

    public func close() async {
        try? await channel.close()
    }
}

/// One connection: each request's answer written by hand (so garbage can be written too).
private final class MetadataRequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart

    let answer: @Sendable (MetadataServer.Request) -> MetadataServer.Answer
    private var head: HTTPRequestHead?

    init(answer: @escaping @Sendable (MetadataServer.Request) -> MetadataServer.Answer) {
        self.answer = answer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: break
        case .end:
            guard let head else { return }
            let request = MetadataServer.Request(method: head.method.rawValue, uri: head.uri, headers: head.headers.map { ($0.name, $0.value) })
            let channel = context.channel
            switch answer(request) {
            case .hang:
                break
            case .garbage(let bytes):
                context.writeAndFlush(NIOAny(channel.allocator.buffer(bytes: bytes))).whenComplete { _ in channel.close(promise: nil) }
            case .respond(let status, let body):
                let text = "HTTP/1.1 \(status) X\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body
                context.writeAndFlush(NIOAny(channel.allocator.buffer(string: text))).whenComplete { _ in channel.close(promise: nil) }
            }
        }
    }
}
