import ArgumentParser
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import OutboundProxy

#if canImport(Glibc)
import Glibc
#endif

/// `agent-bench outbound`: the agent's own HTTP client (`CheckedHTTPClient`: coderd's REST
/// calls and cloud metadata on a new connection per request, MCP servers on kept-alive ones)
/// against bare SwiftNIO doing the same, both to a bare SwiftNIO server on loopback: a new
/// connection per request (connect, the HTTP/1.1 codec, one request, the answer read whole,
/// close), and a kept-alive connection (the next request on it). Beside them, for
/// information: the same request over a blocking socket, new and kept alive. The sides take
/// turns request by request, so a busy moment of the host falls on all of them.
struct OutboundBenchmarks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outbound", abstract: "The agent's HTTP client: a request on a new connection against bare SwiftNIO's.")

    @Option(help: "Requests per side.") var requests = 2000

    static let body = #"{"ok":true}"#
    static let path = "/api/v2/buildinfo"

    func run() async throws {
        let port = Bench.freePort()
        let head = "HTTP/1.1 200 OK\nContent-Type: application/json\nContent-Length: \(Self.body.utf8.count)"
        let server = Bench.spawn([Bench.selfExecutable(), "nio-http-server", "--port", "\(port)", "--head", head, "--body", Self.body])
        defer {
            kill(server, SIGKILL)
            _ = Bench.wait(server)
        }
        guard ProcessBenchmarks().connectWhenHealthy(port: port) != nil else { throw ValidationError("the server did not start") }
        let client = try CheckedHTTPClient(route: .direct)
        let pooled = try CheckedHTTPClient(route: .direct, keepAlive: .init(idleTimeout: .seconds(600)))
        let bareAlive = try await BareKeptAlive(port: port)
        guard
            let request = CheckedHTTPClient.Request(
                method: .GET, url: "http://127.0.0.1:\(port)\(Self.path)", headers: [("Coder-Session-Token", "bench")])
        else { throw ValidationError("no request") }
        guard let keptAlive = BlockingHTTP(port: port) else { throw ValidationError("no connection") }

        print("agent-bench outbound: \(requests) sequential GETs per side, the sides taking turns request by request (medians)")
        // Warm-up: connections, the event loop, the code paths.
        for _ in 0..<50 {
            _ = try await Self.checked(client, request)
            _ = try await Self.bareNIO(port: port)
            _ = try await Self.checked(pooled, request)
            _ = try await bareAlive.request()
        }
        var ours: [Double] = []
        var bare: [Double] = []
        var oursAlive: [Double] = []
        var bareKept: [Double] = []
        var blocking: [Double] = []
        var alive: [Double] = []
        for _ in 0..<requests {
            ours.append(try await Self.timed { try await Self.checked(client, request) })
            bare.append(try await Self.timed { try await Self.bareNIO(port: port) })
            oursAlive.append(try await Self.timed { try await Self.checked(pooled, request) })
            bareKept.append(try await Self.timed { try await bareAlive.request() })
            blocking.append(try await Self.timed { try Self.blocking(port: port) })
            alive.append(try await Self.timed { keptAlive.request("GET", Self.path)?.0 == 200 })
        }
        try? await bareAlive.channel.close()
        let (agent, baseline) = (Bench.median(ours), Bench.median(bare))
        report(
            "request on a new connection (median)", value: Bench.format(agent), baseline: Bench.format(baseline), ratio: agent / baseline,
            goal: "<= 1.3x bare SwiftNIO's new connection per request", met: agent / baseline <= 1.3)
        let floor = Bench.median(blocking)
        report(
            "  blocking socket, new connection", value: Bench.format(floor), baseline: Bench.format(agent), ratio: floor / agent,
            goal: "(information: the floor, connect/write/read/close)", met: true)
        let (agentAlive, bareAliveMedian) = (Bench.median(oursAlive), Bench.median(bareKept))
        report(
            "request on a kept-alive connection (median)", value: Bench.format(agentAlive), baseline: Bench.format(bareAliveMedian),
            ratio: agentAlive / bareAliveMedian, goal: "<= 1.5x bare SwiftNIO's kept-alive connection", met: agentAlive / bareAliveMedian <= 1.5)
        report(
            "  kept alive against a new connection (agent)", value: Bench.format(agentAlive), baseline: Bench.format(agent), ratio: agentAlive / agent,
            goal: "<= 0.6x: what keeping connections saves", met: agentAlive / agent <= 0.6)
        let kept = Bench.median(alive)
        report(
            "  blocking socket, kept alive", value: Bench.format(kept), baseline: Bench.format(agentAlive), ratio: kept / agentAlive,
            goal: "(information: the floor of a kept-alive request)", met: true)
    }

    /// Nanoseconds one call took; throws if it failed.
    static func timed(_ call: () async throws -> Bool) async throws -> Double {
        let start = Bench.now()
        guard try await call() else { throw ValidationError("a request failed") }
        return Double(Bench.now() - start)
    }

    /// One request through the agent's client, its body read whole.
    static func checked(_ client: CheckedHTTPClient, _ request: CheckedHTTPClient.Request) async throws -> Bool {
        try await client.execute(request, deadline: .now() + .seconds(30)) { head, body in
            let bytes = try await body.collect(upTo: 1 << 20)
            return head.status == .ok && bytes.count == Self.body.utf8.count
        }
    }

    /// One request by bare SwiftNIO: a client bootstrap, the HTTP/1.1 codec and a handler that
    /// writes the request when the connection is up and completes at the answer's end.
    static func bareNIO(port: Int) async throws -> Bool {
        let group = MultiThreadedEventLoopGroup.singleton
        let promise = group.next().makePromise(of: Int.self)
        let address = try SocketAddress(ipAddress: "127.0.0.1", port: port)
        let channel = try await ClientBootstrap(group: group)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(OneExchange(port: port, promise: promise))
                }
            }
            .connect(to: address).get()
        let bytes = try await promise.futureResult.get()
        try? await channel.close()
        return bytes == Self.body.utf8.count
    }

    /// One request on a new blocking socket: connect, write, read to the answer's end, close.
    static func blocking(port: Int) throws -> Bool {
        guard let fd = Bench.connect(port: port, noDelay: true) else { return false }
        defer { close(fd) }
        let text = "GET \(Self.path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nCoder-Session-Token: bench\r\nConnection: close\r\n\r\n"
        guard Bench.sendAll(fd, Array(text.utf8)) else { return false }
        var buffer: [UInt8] = []
        var scratch = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<1000 {
            if let head = RawHTTPClient.parseHead(buffer, buffer.count), buffer.count >= head.end + head.length { return true }
            let count = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return false }
            buffer += scratch[..<count]
        }
        return false
    }
}

/// Bare SwiftNIO on one kept-alive connection: each request written from the event loop, its
/// answer's end completing a promise.
private final class BareKeptAlive: Sendable {
    let channel: any Channel
    private let handler: NIOLoopBound<KeptAliveExchange>

    init(port: Int) async throws {
        let address = try SocketAddress(ipAddress: "127.0.0.1", port: port)
        (channel, handler) = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connect(to: address) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let exchange = KeptAliveExchange(port: port)
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(exchange)
                    return (channel, NIOLoopBound(exchange, eventLoop: channel.eventLoop))
                }
            }
    }

    /// One request, its body's length checked.
    func request() async throws -> Bool {
        let handler = self.handler
        let bytes = try await channel.eventLoop.flatSubmit { handler.value.send() }.get()
        return bytes == OutboundBenchmarks.body.utf8.count
    }
}

/// The kept-alive side's handler: writes a request when asked, completes at the answer's end.
private final class KeptAliveExchange: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart
    private let port: Int
    private var context: ChannelHandlerContext?
    private var promise: EventLoopPromise<Int>?
    private var length = 0

    init(port: Int) { self.port = port }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func send() -> EventLoopFuture<Int> {
        guard let context else { return MultiThreadedEventLoopGroup.singleton.next().makeFailedFuture(ChannelError.ioOnClosedChannel) }
        let promise = context.eventLoop.makePromise(of: Int.self)
        self.promise = promise
        length = 0
        let headers = HTTPHeaders([("Host", "127.0.0.1:\(port)"), ("Coder-Session-Token", "bench")])
        context.write(wrapOutboundOut(.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: OutboundBenchmarks.path, headers: headers))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        return promise.futureResult
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: break
        case .body(let chunk): length += chunk.readableBytes
        case .end:
            promise?.succeed(length)
            promise = nil
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise?.fail(ChannelError.eof)
        promise = nil
        context.fireChannelInactive()
    }
}

/// Bare SwiftNIO's exchange: the request on `channelActive`, the body's length at `.end`.
private final class OneExchange: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart
    private let port: Int
    private let promise: EventLoopPromise<Int>
    private var length = 0
    private var settled = false

    init(port: Int, promise: EventLoopPromise<Int>) {
        self.port = port
        self.promise = promise
    }

    func channelActive(context: ChannelHandlerContext) {
        let headers = HTTPHeaders([
            ("Host", "127.0.0.1:\(port)"), ("Coder-Session-Token", "bench"), ("Connection", "close"),
        ])
        context.write(wrapOutboundOut(.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: OutboundBenchmarks.path, headers: headers))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: break
        case .body(let chunk): length += chunk.readableBytes
        case .end: settle(.success(length))
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        settle(.failure(error))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        settle(.failure(ChannelError.eof))
        context.fireChannelInactive()
    }

    private func settle(_ result: Result<Int, any Error>) {
        guard !settled else { return }
        settled = true
        promise.completeWith(result)
    }
}
