import AgentSystem
import FoundationEssentials
import NIOCore
import NIOHTTP1
import NIOPosix
import AgentTLS
import Synchronization

/// HTTP/1.1 requests of the agent's own (coderd's REST API, cloud metadata, MCP servers),
/// directly or through the environment's proxy (``ProxyRoute``: an HTTP proxy's `CONNECT`
/// tunnel for https, absolute-form requests to it for http, or SOCKS5), with an https
/// server's identity checked as Go checks it
/// (``ProxyRoute/tlsClientHandler(context:host:serverName:)``: never by the connected
/// address, which is the proxy's or wherever DNS pointed). By default one connection per request, closed after its answer
/// (`Connection: close`), so no request ever goes out on a connection the server is closing;
/// with ``KeepAlive`` a connection whose answer ended whole waits for the next request to the
/// same origin (``ConnectionPool``), saving a connect and a TLS handshake per request. The
/// answer is read with backpressure, at most ``maxQueuedParts`` parts (each at most one read,
/// 64 KiB) waiting unread.
public struct CheckedHTTPClient: Sendable {
    /// Answer parts read ahead of the consumer (the stream's high watermark).
    public static let maxQueuedParts = 10

    /// Connections kept open between requests: at most `maxIdle` idle ones, each closed after
    /// `idleTimeout` unused (or the server's own `Keep-Alive: timeout`, less a second).
    public struct KeepAlive: Sendable {
        public var maxIdle: Int
        public var idleTimeout: TimeAmount

        /// Go's transport keeps 2 idle connections per host. A connection is used again only
        /// within 1 s of its last answer: servers close idle connections after 2 s (gunicorn)
        /// to 5 s (Node.js, uvicorn, Apache), and a request sent as the server closes fails,
        /// so the agent stays well inside the shortest.
        public init(maxIdle: Int = 2, idleTimeout: TimeAmount = .seconds(1)) {
            self.maxIdle = maxIdle
            self.idleTimeout = idleTimeout
        }
    }

    /// One request: `url` is `http[s]://host[:port]/path?query`.
    public struct Request: Sendable {
        public let method: HTTPMethod
        /// `https`: TLS, with the server's identity checked.
        public let secure: Bool
        public let host: String
        public let port: Int
        /// The path and query (origin form).
        public let target: String
        public var headers: [(String, String)]
        public var body: [UInt8]?

        /// The `Host` header: the host (bracketed if IPv6) and the port if the URL has one, as
        /// Go sends it (the URL's host as written).
        let hostHeader: String

        /// Nil for a URL that is not `http://` or `https://` with a host and a port in
        /// 1...65535 (NIO's socket address traps on a larger one).
        public init?(method: HTTPMethod, url: String, headers: [(String, String)] = [], body: [UInt8]? = nil) {
            guard let target = URLTarget(url), target.scheme == "https" || target.scheme == "http" else { return nil }
            let secure = target.scheme == "https"
            let port = target.port ?? (secure ? 443 : 80)
            guard (1...65535).contains(port) else { return nil }
            self.method = method
            self.secure = secure
            self.host = target.host
            self.port = port
            self.target = target.pathAndQuery
            self.headers = headers
            self.body = body
            let bare = target.host.contains(":") ? "[\(target.host)]" : target.host
            hostHeader = target.port.map { "\(bare):\($0)" } ?? bare
        }

        /// Headers the request sets itself; the caller's are dropped, as Go's `Request.Write`
        /// drops them.
        static let ownHeaders: Set<String> = ["host", "content-length", "transfer-encoding", "trailer", "connection"]

        /// The request's head on `route`: `Host`, the caller's headers, the body's length (0
        /// for a method that carries one without it, as Go sends it) and, unless the
        /// connection is kept alive, `Connection: close`. To a forwarding proxy the target is
        /// the absolute URL, with the proxy's credentials as `Proxy-Authorization` (Go's
        /// transport sends them so).
        func head(on route: ProxyRoute, keepAlive: Bool = false) -> HTTPRequestHead {
            var headers = HTTPHeaders([("Host", hostHeader)])
            for (name, value) in self.headers where !Self.ownHeaders.contains(name.lowercased()) { headers.add(name: name, value: value) }
            if let body {
                headers.add(name: "Content-Length", value: String(body.count))
            } else if [.POST, .PUT, .PATCH].contains(method) {
                headers.add(name: "Content-Length", value: "0")
            }
            if !keepAlive { headers.add(name: "Connection", value: "close") }
            let (uri, authorization) = route.requestTarget(hostHeader: hostHeader, pathAndQuery: target)
            if let authorization { headers.replaceOrAdd(name: "Proxy-Authorization", value: authorization) }
            return HTTPRequestHead(version: .http1_1, method: method, uri: uri, headers: headers)
        }
    }

    /// The status line and headers of an answer.
    public struct Head: Sendable {
        public let status: HTTPResponseStatus
        public let headers: HTTPHeaders
        /// Whether the request went out on a connection kept alive from an earlier one.
        public var reusedConnection = false
    }

    /// What a deadline bounds: the wait for the answer's head, or the whole answer.
    public enum DeadlineScope: Sendable {
        case head
        case wholeAnswer
    }

    /// Directly, or through a proxy.
    public let route: ProxyRoute
    /// The TLS context for https targets; nil takes the system's store (loaded on first use).
    private let context: TLSContext?
    private let connectTimeout: TimeAmount
    private let group: any EventLoopGroup
    /// Idle connections, when kept alive.
    private let pool: ConnectionPool?
    /// Where names are looked up; nil: NIO's resolver (with Happy Eyeballs).
    private let lookups: BlockingPool?

    /// - Parameters:
    ///   - route: how requests travel (``ProxyRoute/choose(url:environment:anyProxyKind:)``
    ///     picks it from the environment); a forwarding route refuses https requests, which
    ///     it would send in the clear.
    ///   - tlsConfiguration: the trust for https targets; nil takes the system's store, whose
    ///     context is shared (``AgentTLS/TLSContextCache``).
    ///   - connectTimeout: the TCP connect, within each request's deadline.
    ///   - keepAlive: whether (and how long) connections wait for the next request; nil closes
    ///     each after its answer.
    ///   - lookups: where names are looked up (``NameLookup``), for a client whose targets
    ///     come from outside (an MCP server's URL); nil: NIO's resolver.
    public init(
        route: ProxyRoute, tlsConfiguration: TLSConfiguration? = nil, connectTimeout: TimeAmount = .seconds(10),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, keepAlive: KeepAlive? = nil, lookups: BlockingPool? = nil
    ) throws {
        self.route = route
        self.context = try tlsConfiguration.map { configuration throws(TLSError) in try TLSContext(configuration: configuration) }
        self.connectTimeout = connectTimeout
        self.group = group
        pool = keepAlive.map { ConnectionPool(maxIdle: $0.maxIdle, idleTimeout: $0.idleTimeout) }
        self.lookups = lookups
    }

    /// Idle connections waiting for a request (tests).
    var idleConnections: Int { pool?.idleCount ?? 0 }

    /// Closes the connections kept alive and idle (the client's user is done with it).
    public func closeIdleConnections() {
        pool?.closeAll()
    }

    /// The context of ``init(route:tlsConfiguration:connectTimeout:group:keepAlive:lookups:)``'s
    /// configuration, else the system store's, shared with the agent's other dials.
    private func trustContext(deadline: NIODeadline) async throws -> TLSContext {
        if let context { return context }
        return try await TLSContextCache.shared.context(for: .makeClientConfiguration(), deadline: deadline)
    }

    /// Sends `request` and hands its answer's head and body to `consume`; the connection is
    /// closed when `consume` returns (or, kept alive, waits for the next request if the whole
    /// answer had arrived). Past `deadline` (for `scope`) the connection is closed
    /// and the call throws ``CheckedHTTPError/timedOut``; cancelling the task closes it too.
    /// `fresh` takes a new connection even if one is kept alive (a request sent again after
    /// its connection closed).
    public func execute<Result>(
        _ request: Request, deadline: NIODeadline, scope: DeadlineScope = .wholeAnswer, fresh: Bool = false,
        _ consume: (Head, Body) async throws -> Result
    ) async throws -> Result {
        let watch = ConnectionWatch()
        return try await withTaskCancellationHandler {
            do {
                let result = try await exchange(request, deadline: deadline, scope: scope, fresh: fresh, watch: watch, consume)
                // A body that ends at its connection's close looks whole when a deadline or
                // the task's cancellation closed it.
                if let ending = watch.ending { throw ending }
                return result
            } catch {
                if let ending = watch.ending { throw ending }
                // NIO's own connect timeout (TCP's, or Happy Eyeballs' with the lookup), or the
                // wait for the TLS context: the request's deadline when that was the nearer,
                // else the connect timeout.
                switch error {
                case ChannelError.connectTimeout, TLSError.timedOut:
                    throw deadline <= .now() ? CheckedHTTPError.timedOut : CheckedHTTPError.setupTimedOut
                default:
                    throw error
                }
            }
        } onCancel: {
            watch.cancel()
        }
    }

    private func exchange<Result>(
        _ request: Request, deadline: NIODeadline, scope: DeadlineScope, fresh: Bool, watch: ConnectionWatch,
        _ consume: (Head, Body) async throws -> Result
    ) async throws -> Result {
        if let ending = watch.ending { throw ending }
        let route = self.route
        if case .forward(let proxy) = route, request.secure {
            throw ProxyError.unsupported(proxy, "an https request is not forwarded in the clear")
        }
        // An https:// proxy is checked with the same trust as the targets.
        // The context's wait is part of the set-up: bounded like the connect.
        let trust = request.secure || route.proxyTLS ? try await trustContext(deadline: min(deadline, .now() + self.connectTimeout)) : nil
        let context = request.secure ? trust : nil
        let proxyContext = route.proxyTLS ? trust : nil
        // A request forwarded to an https:// proxy is ready at the proxy's handshake (a
        // tunnel's, at the target's: the proxy's events stay with its handshake).
        let forwardedOverTLS: Bool
        if case .forward = route { forwardedOverTLS = route.proxyTLS } else { forwardedOverTLS = false }
        let destination = route.connectAddress(host: request.host, port: request.port)
        let serverName = ProxyRoute.serverName(for: request.host)
        let (host, port) = (request.host, request.port)
        let connectTimeout = max(.milliseconds(1), min(self.connectTimeout, deadline - .now()))
        // The connect timeout covers the proxy's and TLS's handshakes too.
        let setupDeadline = NIODeadline.now() + connectTimeout
        let setupExpired: @Sendable () -> Void = { watch.expired(.setup) }
        let deadlineExpired: @Sendable () -> Void = { watch.expired(.deadline) }
        var written: [HTTPClientRequestPart] = [.head(request.head(on: route, keepAlive: pool != nil))]
        if let body = request.body, !body.isEmpty { written.append(.body(.byteBuffer(ByteBuffer(bytes: body)))) }
        written.append(.end(nil))
        let parts = written
        let headOnly = scope == .head
        let key = ConnectionPool.Key(secure: request.secure, host: host, port: port)
        if !fresh, let connection = pool?.take(key) {
            watch.opened(connection.channel)
            let started = connection.start(parts, deadline: deadline, headOnly: headOnly, expired: deadlineExpired)
            return try await answer(connection, key: key, started, reused: true, watch: watch, consume)
        }
        // The initializer runs once per connection attempt (Happy Eyeballs may make several):
        // a cancellation closes every attempt; each attempt's handlers own its timers, on its
        // event loop (a head-only deadline ends there as the head arrives, before its timer
        // could close a connection whose answer came in time).
        typealias Started = (OpenConnection, (EventLoopFuture<HTTPResponseHead>, AnswerStreamHandler.Producer, StreamEnd))
        let initializer: @Sendable (any Channel) -> EventLoopFuture<Started> = { channel in
            channel.eventLoop.makeCompletedFuture {
                watch.attempt(channel)
                let pipeline = channel.pipeline.syncOperations
                // The proxy's handler first: TLS and the request start behind it.
                try route.addHandlers(to: pipeline, host: host, port: port, proxyContext: proxyContext)
                if let context { try pipeline.addHandler(route.tlsClientHandler(context: context, host: host, serverName: serverName)) }
                // Ready at the target's TLS handshake, else (forwarded to an https:// proxy) the
                // proxy's, else at channelActive.
                try pipeline.addHandler(ConnectionSetupHandler(tls: context != nil || forwardedOverTLS, deadline: setupDeadline, expired: setupExpired))
                try pipeline.addHTTPClientHandlers()
                let handlers = ExchangeHandlers()
                try pipeline.addHandlers([handlers.writer, handlers.head, handlers.answer])
                let connection = OpenConnection(
                    channel: channel, handlers: NIOLoopBound(handlers, eventLoop: channel.eventLoop),
                    answer: NIOLoopBound(handlers.answer, eventLoop: channel.eventLoop), closing: handlers.answer.closing)
                return (connection, connection.start(parts, deadline: deadline, headOnly: headOnly, expired: deadlineExpired))
            }
        }
        let bootstrap = ClientBootstrap(group: group).connectTimeout(connectTimeout).channelOption(.tcpOption(.tcp_nodelay), value: 1)
        // An address needs no resolver (NIO's queues its lookups per event loop, behind others');
        // a name goes to ``lookups`` when the client has them.
        let (connection, started): Started
        if let address = try? SocketAddress(ipAddress: destination.host, port: destination.port) {
            (connection, started) = try await bootstrap.connect(to: address, channelInitializer: initializer)
        } else if let lookups {
            let addresses = try await NameLookup.addresses(destination.host, port: destination.port, deadline: deadline, pool: lookups)
            var made: Started?
            var failure: (any Error)?
            // Bounded: one or two addresses (the first of each family, the resolver's first first), one connect each.
            for address in addresses where made == nil {
                do { made = try await bootstrap.connect(to: address, channelInitializer: initializer) } catch { failure = error }
            }
            guard let made else { throw failure ?? NameLookup.Failure(description: "lookup \(destination.host): no such host") }
            (connection, started) = made
        } else {
            (connection, started) = try await bootstrap.connect(host: destination.host, port: destination.port, channelInitializer: initializer)
        }
        watch.opened(connection.channel)
        return try await answer(connection, key: key, started, reused: false, watch: watch, consume)
    }

    /// Hands the answer to `consume`, then keeps the connection for the next request (kept
    /// alive, the answer arrived whole, and neither side asking to close) or closes it.
    private func answer<Result>(
        _ connection: OpenConnection, key: ConnectionPool.Key,
        _ started: (head: EventLoopFuture<HTTPResponseHead>, stream: AnswerStreamHandler.Producer, ended: StreamEnd), reused: Bool,
        watch: ConnectionWatch, _ consume: (Head, Body) async throws -> Result
    ) async throws -> Result {
        do {
            let answer = try await started.head.get()
            // A TLS close lets reads through until the server's `close_notify`: a head that
            // came after a deadline closed the connection is late, not an answer.
            if let ending = watch.ending { throw ending }
            let head = Head(status: answer.status, headers: answer.headers, reusedConnection: reused)
            let result = try await consume(head, Body(parts: started.stream, watch: watch))
            // The answer is the caller's: a deadline while the connection closes is not a failure.
            if let ending = watch.finish() { throw ending }
            if let pool, let ended = started.ended.at, answer.version == .http1_1,
                !answer.headers[canonicalForm: "connection"].contains(where: { $0.lowercased() == "close" })
            {
                pool.put(key, connection, answer: answer.headers, since: ended)
            } else {
                connection.channel.close(promise: nil)
            }
            return result
        } catch {
            connection.channel.close(promise: nil)
            throw error
        }
    }

    /// An answer's body, chunk by chunk as it arrives; iterate it once. A connection that ends
    /// before the body does throws (``CheckedHTTPError/incompleteAnswer``), never a short body.
    public struct Body: AsyncSequence, Sendable {
        public typealias Element = ByteBuffer
        let parts: AnswerStreamHandler.Producer
        let watch: ConnectionWatch

        public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(parts: parts.makeAsyncIterator(), watch: watch) }

        /// The whole body, refused with `NIOTooManyBytesError` once past `maxBytes` (never
        /// buffering more).
        public func collect(upTo maxBytes: Int) async throws -> [UInt8] {
            var bytes: [UInt8] = []
            for try await chunk in self {
                guard bytes.count + chunk.readableBytes <= maxBytes else { throw NIOTooManyBytesError(maxBytes: maxBytes) }
                bytes += chunk.readableBytesView
            }
            return bytes
        }

        public struct AsyncIterator: AsyncIteratorProtocol {
            var parts: AnswerStreamHandler.Producer.AsyncIterator
            let watch: ConnectionWatch
            var ended = false

            public mutating func next() async throws -> ByteBuffer? {
                guard !ended else { return nil }
                let part: HTTPClientResponsePart?
                do {
                    part = try await parts.next()
                } catch CheckedHTTPError.incompleteAnswer where Task.isCancelled {
                    // The connection closed because the reader's task was cancelled.
                    ended = true
                    throw CancellationError()
                }
                switch part {
                case .body(let chunk):
                    return chunk
                case .end:
                    ended = true
                    // An answer framed by the connection's end was cut, not ended, when a
                    // deadline or a cancellation closed the connection.
                    if let ending = watch.ending { throw ending }
                    return nil
                case .head:
                    throw CheckedHTTPError.incompleteAnswer
                case nil:
                    ended = true
                    if Task.isCancelled { throw CancellationError() }
                    throw CheckedHTTPError.incompleteAnswer
                }
            }
        }
    }
}
