import AgentTestSupport
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization
import Testing

@testable import OutboundProxy

/// The tunnel and the checked client's forwarding against Debian's tinyproxy, a real proxy.
@Suite(.timeLimit(.minutes(3)))
struct TinyProxyTunnelTests {
    /// Echoes what it reads.
    private final class Echo: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            context.writeAndFlush(data, promise: nil)
        }
    }

    /// Collects what the client reads and the errors it sees.
    private final class Collector: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let read = Mutex<[UInt8]>([])
        let errors = Mutex<[ProxyError]>([])
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let bytes = Array(unwrapInboundIn(data).readableBytesView)
            read.withLock { $0 += bytes }
        }
        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            if let error = error as? ProxyError { errors.withLock { $0.append(error) } }
        }
    }

    private func connect(through proxy: ProxyServer, to port: Int, collector: Collector) async throws -> any Channel {
        let route = ProxyRoute.tunnel(proxy)
        let destination = route.connectAddress(host: "0.0.0.0", port: port)
        return try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try route.addHandlers(to: channel.pipeline.syncOperations, host: "0.0.0.0", port: port)
                    try channel.pipeline.syncOperations.addHandler(collector)
                }
            }
            .connect(host: destination.host, port: destination.port).get()
    }

    @Test func aTunnelCarriesBytesBothWaysWithCredentials() async throws {
        let proxy = try await TinyProxy.start(credentials: ("agent", "s3cret"))
        defer { proxy.stop() }
        let echo = try await LoopbackListener { channel in
            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Echo()) }
        }
        let server = ProxyServer(kind: .http, host: "127.0.0.1", port: proxy.port, username: "agent", password: "s3cret")
        let collector = Collector()
        let channel = try await connect(through: server, to: echo.port, collector: collector)
        // Written at once: held until the tunnel is up, then echoed through it.
        try await channel.writeAndFlush(channel.allocator.buffer(string: "ping")).get()
        #expect(await eventually { collector.read.withLock { $0 } == Array("ping".utf8) })
        #expect(proxy.requests() == ["CONNECT 0.0.0.0:\(echo.port) HTTP/1.1"])
        try await channel.close()
        await echo.close()
    }

    @Test func withoutCredentialsTheProxysRefusalIsTheError() async throws {
        let proxy = try await TinyProxy.start(credentials: ("agent", "s3cret"))
        defer { proxy.stop() }
        let server = ProxyServer(kind: .http, host: "127.0.0.1", port: proxy.port)
        let collector = Collector()
        let channel = try await connect(through: server, to: 9, collector: collector)
        try await channel.closeFuture.get()
        let errors = collector.errors.withLock { $0 }
        #expect(errors.count == 1)
        guard case .refused(_, let target, let status, _) = errors.first else {
            Issue.record("not a refusal: \(errors)")
            return
        }
        #expect(target == "0.0.0.0:9")
        #expect(status == 407)
    }

    /// Plain http goes to the proxy as its own request, the absolute URL as its target, as
    /// Go's transport sends it (AsyncHTTPClient, which carried these before, tunnelled it).
    @Test func plainHTTPIsForwardedToTheProxy() async throws {
        let proxy = try await TinyProxy.start()
        defer { proxy.stop() }
        let server = try await LoopbackListener { channel in
            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(OneAnswer()) }
        }
        let url = "http://0.0.0.0:\(server.port)/hello"
        let route = try ProxyRoute.choose(url: url, environment: ProxyEnvironment(environment: ["HTTP_PROXY": proxy.url()]), anyProxyKind: true)
        #expect(route.proxy != nil)
        let client = try CheckedHTTPClient(route: route)
        let request = try #require(CheckedHTTPClient.Request(method: .GET, url: url))
        let (status, body) = try await client.execute(request, deadline: .now() + .seconds(30)) { head, body in
            (head.status.code, try await body.collect(upTo: 1024))
        }
        #expect(status == 200)
        #expect(body == Array("ok".utf8))
        #expect(proxy.requests() == ["GET http://0.0.0.0:\(server.port)/hello HTTP/1.1"])
        await server.close()
    }

    /// Answers the first request on a connection with 200 `ok` and closes.
    private final class OneAnswer: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(channel.allocator.buffer(string: answer))).whenComplete { _ in
                channel.close(promise: nil)
            }
        }
    }
}
