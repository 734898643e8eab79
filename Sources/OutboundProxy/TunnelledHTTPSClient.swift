import FoundationEssentials
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

/// HTTP/1.1 requests to an `https://` server through an HTTP proxy's `CONNECT` tunnel, with
/// the server's identity checked as Go checks it (``ProxyRoute/tlsClientHandler(context:host:serverName:)``).
/// AsyncHTTPClient cannot be given that check and accepts a certificate naming the proxy's
/// address, so what carries a credential through a proxy goes here. One connection per
/// request, closed after its answer; the answer is read with backpressure, at most
/// ``maxQueuedParts`` parts (each at most one read, 64 KiB) waiting unread.
public struct TunnelledHTTPSClient: Sendable {
    /// Answer parts read ahead of the consumer (NIOAsyncChannel's watermark).
    public static let maxQueuedParts = 10

    /// One request: `url` is `https://host[:port]/path?query`.
    public struct Request: Sendable {
        public var method: HTTPMethod
        public var host: String
        public var port: Int
        /// The path and query (origin form).
        public var target: String
        public var headers: [(String, String)]
        public var body: [UInt8]?

        /// Nil for a URL that is not `https://` with a host.
        public init?(method: HTTPMethod, url: String, headers: [(String, String)] = [], body: [UInt8]? = nil) {
            guard let target = URLTarget(url), target.scheme == "https" else { return nil }
            self.method = method
            self.host = target.host
            self.port = target.port ?? 443
            self.target = target.pathAndQuery
            self.headers = headers
            self.body = body
        }

        /// The `Host` header: the host (bracketed if IPv6) and a port other than 443.
        var hostHeader: String {
            let bare = host.contains(":") ? "[\(host)]" : host
            return port == 443 ? bare : "\(bare):\(port)"
        }
    }

    /// The status line and headers of an answer.
    public struct Head: Sendable {
        public let status: HTTPResponseStatus
        public let headers: HTTPHeaders
    }

    /// What a deadline bounds: the wait for the answer's head, or the whole answer.
    public enum DeadlineScope: Sendable {
        case head
        case wholeAnswer
    }

    public let proxy: ProxyServer
    private let context: NIOSSLContext
    private let group: any EventLoopGroup

    /// - Parameters:
    ///   - proxy: an `http://` proxy (others throw ``ProxyError/unsupported(_:_:)``).
    ///   - tlsConfiguration: the trust for the target; nil takes the system's store, whose
    ///     context is made once for the process.
    public init(
        proxy: ProxyServer, tlsConfiguration: TLSConfiguration? = nil,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws {
        guard proxy.kind == .http else { throw ProxyError.unsupported(proxy, "only http:// proxies are supported for this connection") }
        self.proxy = proxy
        if let tlsConfiguration {
            self.context = try NIOSSLContext(configuration: ProxyRoute.tunnel(proxy).tlsConfiguration(tlsConfiguration))
        } else {
            self.context = try Self.systemTrust.get()
        }
        self.group = group
    }

    /// The context for the system's trust store inside a tunnel (loading the store costs
    /// milliseconds; a context is safe to share).
    private static let systemTrust = Result {
        try NIOSSLContext(
            configuration: ProxyRoute.tunnel(ProxyServer(kind: .http, host: "", port: 0)).tlsConfiguration(.makeClientConfiguration()))
    }

    /// Sends `request` and hands its answer's head and body to `consume`; the connection is
    /// closed when `consume` returns. Past `deadline` (for `scope`) the connection is closed
    /// and the call throws ``TunnelledHTTPSError/timedOut``; cancelling the task closes it too.
    public func execute<Result>(
        _ request: Request, deadline: NIODeadline, scope: DeadlineScope = .wholeAnswer,
        _ consume: (Head, Body) async throws -> Result
    ) async throws -> Result {
        let watch = ConnectionWatch()
        return try await withTaskCancellationHandler {
            do {
                return try await exchange(request, deadline: deadline, scope: scope, watch: watch, consume)
            } catch {
                if watch.expired { throw TunnelledHTTPSError.timedOut }
                if watch.cancelled { throw CancellationError() }
                throw error
            }
        } onCancel: {
            watch.cancel()
        }
    }

    private func exchange<Result>(
        _ request: Request, deadline: NIODeadline, scope: DeadlineScope, watch: ConnectionWatch,
        _ consume: (Head, Body) async throws -> Result
    ) async throws -> Result {
        if watch.cancelled { throw CancellationError() }
        let route = ProxyRoute.tunnel(proxy)
        let serverName = IPAddressBytes(request.host) == nil ? request.host : nil
        let (context, host, port) = (self.context, request.host, request.port)
        let connectTimeout = max(.milliseconds(1), deadline - .now())
        let (channel, head) = try await ClientBootstrap(group: group)
            .connectTimeout(connectTimeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connect(host: proxy.host, port: proxy.port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let timer = channel.eventLoop.scheduleTask(deadline: deadline) { watch.expire() }
                    watch.opened(channel, timer: timer)
                    let pipeline = channel.pipeline.syncOperations
                    // The tunnel first: TLS and the request start inside it.
                    try route.addHandlers(to: pipeline, host: host, port: port)
                    try pipeline.addHandler(route.tlsClientHandler(context: context, host: host, serverName: serverName))
                    try pipeline.addHTTPClientHandlers()
                    let headPromise = channel.eventLoop.makePromise(of: HTTPResponseHead.self)
                    try pipeline.addHandler(ResponseHeadHandler(promise: headPromise))
                    let async = try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(
                        wrappingChannelSynchronously: channel,
                        configuration: .init(backPressureStrategy: .init(lowWatermark: 2, highWatermark: Self.maxQueuedParts)))
                    return (async, headPromise.futureResult)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            var headers = HTTPHeaders([("Host", request.hostHeader)])
            for (name, value) in request.headers { headers.add(name: name, value: value) }
            if let body = request.body { headers.replaceOrAdd(name: "Content-Length", value: String(body.count)) }
            headers.replaceOrAdd(name: "Connection", value: "close")
            var parts: [HTTPClientRequestPart] = [
                .head(HTTPRequestHead(version: .http1_1, method: request.method, uri: request.target, headers: headers))
            ]
            if let body = request.body, !body.isEmpty { parts.append(.body(.byteBuffer(ByteBuffer(bytes: body)))) }
            parts.append(.end(nil))
            // A failed write means a failed connection; its cause is the head's failure.
            try? await outbound.write(contentsOf: parts)
            let answer = try await head.get()
            if scope == .head { watch.stopTimer() }
            defer { watch.stopTimer() }
            return try await consume(Head(status: answer.status, headers: answer.headers), Body(parts: inbound))
        }
    }

    /// An answer's body, chunk by chunk as it arrives; iterate it once. A connection that ends
    /// before the body does throws (``TunnelledHTTPSError/incompleteAnswer``), never a short body.
    public struct Body: AsyncSequence, Sendable {
        public typealias Element = ByteBuffer
        let parts: NIOAsyncChannelInboundStream<HTTPClientResponsePart>

        public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(parts: parts.makeAsyncIterator()) }

        public struct AsyncIterator: AsyncIteratorProtocol {
            var parts: NIOAsyncChannelInboundStream<HTTPClientResponsePart>.AsyncIterator
            var ended = false

            public mutating func next() async throws -> ByteBuffer? {
                guard !ended else { return nil }
                switch try await parts.next() {
                case .body(let chunk):
                    return chunk
                case .end:
                    ended = true
                    return nil
                case .head:
                    throw TunnelledHTTPSError.incompleteAnswer
                case nil:
                    ended = true
                    if Task.isCancelled { throw CancellationError() }
                    throw TunnelledHTTPSError.incompleteAnswer
                }
            }
        }
    }
}

/// Why a tunnelled request failed, beside the proxy's (``ProxyError``) and TLS's own errors.
public enum TunnelledHTTPSError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The deadline passed (Go's words, as the REST client reports it).
    case timedOut
    /// The connection ended before the answer did.
    case incompleteAnswer
    /// The server answered with something that is not an HTTP/1.1 answer to this request.
    case unexpectedAnswer(String)

    public var description: String {
        switch self {
        case .timedOut: "context deadline exceeded"
        case .incompleteAnswer: "unexpected EOF"
        case .unexpectedAnswer(let why): "malformed HTTP response: \(why)"
        }
    }
}

/// Completes a promise with the answer's head and passes only its body and end on, so the
/// caller can read the status before it reads the body (NIO's decoder already drops
/// informational answers). The first error, or the end of the connection before a head,
/// fails the promise with that cause: the TLS check's, or the proxy's refusal.
final class ResponseHeadHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias InboundOut = HTTPClientResponsePart

    private let promise: EventLoopPromise<HTTPResponseHead>
    private var waiting = true

    init(promise: EventLoopPromise<HTTPResponseHead>) {
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard waiting else { return context.fireChannelRead(data) }
        switch unwrapInboundIn(data) {
        case .head(let head) where head.status == .switchingProtocols:
            fail(context, TunnelledHTTPSError.unexpectedAnswer("101 Switching Protocols"))
        case .head(let head):
            waiting = false
            promise.succeed(head)
        case .body, .end:
            fail(context, TunnelledHTTPSError.unexpectedAnswer("a body before the status line"))
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard waiting else { return context.fireErrorCaught(error) }
        fail(context, error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        settle(TunnelledHTTPSError.incompleteAnswer)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        settle(TunnelledHTTPSError.incompleteAnswer)
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

/// One request's connection, so that its deadline and its task's cancellation can close it
/// from outside the event loop, and so that the caller can tell which of them ended it.
private final class ConnectionWatch: Sendable {
    private struct State {
        var channel: (any Channel)?
        var timer: Scheduled<Void>?
        var expired = false
        var cancelled = false
    }
    private let state = Mutex(State())

    /// Records the connection; closes it at once if the request was already cancelled.
    func opened(_ channel: any Channel, timer: Scheduled<Void>) {
        let cancelled = state.withLock { s -> Bool in
            s.channel = channel
            s.timer = timer
            return s.cancelled
        }
        if cancelled { channel.close(promise: nil) }
    }

    /// The deadline no longer applies (the head arrived for a head-only one, or the exchange is over).
    func stopTimer() {
        state.withLock { s in
            s.timer?.cancel()
            s.timer = nil
        }
    }

    func expire() {
        let channel = state.withLock { s -> (any Channel)? in
            s.expired = true
            return s.channel
        }
        channel?.close(promise: nil)
    }

    func cancel() {
        let channel = state.withLock { s -> (any Channel)? in
            s.cancelled = true
            s.timer?.cancel()
            return s.channel
        }
        channel?.close(promise: nil)
    }

    var expired: Bool { state.withLock { $0.expired } }
    var cancelled: Bool { state.withLock { $0.cancelled } }
}
