import NIOCore
import NIOEmbedded
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

@testable import OutboundProxy

/// The tunnel's handler on an embedded channel: what it sends, what it holds back, and what it
/// passes on once the proxy answers.
@Suite(.timeLimit(.minutes(1)))
struct HTTPConnectHandlerTests {
    /// Records what reaches the handlers behind the tunnel.
    private final class Behind: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        var active = 0
        var read: [UInt8] = []
        var errors: [any Error] = []
        func channelActive(context: ChannelHandlerContext) { active += 1 }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { read += unwrapInboundIn(data).readableBytesView }
        func errorCaught(context: ChannelHandlerContext, error: any Error) { errors.append(error) }
    }

    /// Set when a promise completes.
    private final class Completion: Sendable {
        let flag = Mutex(false)
        var done: Bool { flag.withLock { $0 } }
        func set() { flag.withLock { $0 = true } }
    }

    private let proxy = ProxyServer(kind: .http, host: "127.0.0.1", port: 3128, username: "u", password: "p")

    private func setUp(host: String = "coder.example", port: Int = 443) throws -> (EmbeddedChannel, Behind) {
        let channel = EmbeddedChannel()
        let behind = Behind()
        try channel.pipeline.syncOperations.addHandler(behind)
        try ProxyRoute.tunnel(proxy).addHandlers(to: channel.pipeline.syncOperations, host: host, port: port)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 3128)).wait()
        return (channel, behind)
    }

    private func written(_ channel: EmbeddedChannel) throws -> String {
        var text = ""
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { text += String(buffer: buffer) }
        return text
    }

    @Test func connectGoesFirstAndEverythingElseWaitsForTheAnswer() throws {
        let (channel, behind) = try setUp()
        #expect(try written(channel) == "CONNECT coder.example:443 HTTP/1.1\r\nHost: coder.example:443\r\nProxy-Authorization: Basic dTpw\r\n\r\n")
        #expect(behind.active == 0)
        // A write from behind (a TLS hello) is held, not sent to the proxy as the request's body;
        // its promise completes once it is out.
        let held = channel.eventLoop.makePromise(of: Void.self)
        channel.writeAndFlush(channel.allocator.buffer(string: "hello"), promise: held)
        let completed = Completion()
        held.futureResult.whenSuccess { completed.set() }
        #expect(try written(channel) == "")
        #expect(!completed.done)
        try channel.writeInbound(channel.allocator.buffer(string: "HTTP/1.1 200 Connection established\r\n"))
        #expect(behind.active == 0)
        try channel.writeInbound(channel.allocator.buffer(string: "\r\nfirst bytes"))
        #expect(behind.active == 1)
        #expect(behind.read == Array("first bytes".utf8))
        #expect(try written(channel) == "hello")
        #expect(completed.done)
        // The handler is gone: later bytes flow both ways untouched.
        #expect(throws: (any Error).self) { try channel.pipeline.syncOperations.handler(type: ProxyHandshakeHandler<HTTPConnectHandshake>.self) }
        try channel.writeInbound(channel.allocator.buffer(string: "more"))
        #expect(behind.read == Array("first bytesmore".utf8))
        _ = try channel.finish()
    }

    @Test func anIPv6TargetIsBracketed() throws {
        let (channel, _) = try setUp(host: "fd00::1", port: 8443)
        #expect(try written(channel).hasPrefix("CONNECT [fd00::1]:8443 HTTP/1.1\r\nHost: [fd00::1]:8443\r\n"))
        _ = try channel.finish()
    }

    @Test func aRefusalFailsTheConnectionAndItsHeldWrites() throws {
        let (channel, behind) = try setUp()
        _ = try written(channel)
        let held = channel.eventLoop.makePromise(of: Void.self)
        channel.writeAndFlush(channel.allocator.buffer(string: "hello"), promise: held)
        try channel.writeInbound(channel.allocator.buffer(string: "HTTP/1.1 407 Proxy Authentication Required\r\n\r\n"))
        #expect(behind.active == 0)
        #expect(behind.errors.count == 1)
        #expect(behind.errors.first as? ProxyError == .refused(proxy: proxy, target: "coder.example:443", status: 407, reason: "Proxy Authentication Required"))
        #expect(throws: ProxyError.self) { try held.futureResult.wait() }
        #expect(!channel.isActive)
        #expect(try written(channel) == "")
    }

    @Test func aCloseBeforeTheAnswerSaysSo() throws {
        let (channel, behind) = try setUp()
        try channel.writeInbound(channel.allocator.buffer(string: "HTTP/1.1 200"))
        channel.pipeline.fireChannelInactive()
        #expect(behind.errors.first as? ProxyError == .closed(proxy: proxy))
        #expect(behind.read.isEmpty)
    }

    /// A reset before the answer is the proxy's connection failing, and says so.
    @Test func anErrorBeforeTheAnswerIsTheProxys() throws {
        let (channel, behind) = try setUp()
        channel.pipeline.fireErrorCaught(IOError(errnoCode: ECONNRESET, reason: "read"))
        #expect(behind.errors.count == 1)
        #expect(behind.errors.first as? ProxyError == .closed(proxy: proxy))
        #expect(!channel.isActive)
    }

    @Test func tooMuchHeldFailsTheConnection() throws {
        let (channel, behind) = try setUp()
        let chunk = channel.allocator.buffer(repeating: 0x61, count: 64 * 1024)
        for _ in 0...(ProxyHandshakeHandler<HTTPConnectHandshake>.maxHeldBytes / chunk.readableBytes) {
            channel.write(chunk, promise: nil)
        }
        #expect(behind.errors.count == 1)
        #expect(!channel.isActive)
    }
}
