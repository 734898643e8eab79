import NIOCore
import NIOEmbedded
import Testing

@testable import OutboundProxy

/// The SOCKS5 connect as bytes (RFC 1928, RFC 1929): what the agent sends, what it makes of
/// the proxy's answers however they are split, and each way the proxy can refuse or break the
/// protocol, in Go's words.
@Suite struct SOCKS5HandshakeTests {
    private static let anonymous = ProxyServer(kind: .socks5, host: "127.0.0.1", port: 1080)
    private static let withCredentials = ProxyServer(kind: .socks5, host: "127.0.0.1", port: 1080, username: "agent", password: "pw")
    private static let name = Array("coder.example.test".utf8)
    /// The connect request for coder.example.test:443, by name.
    private static let connectByName: [UInt8] = [5, 1, 0, 3, UInt8(name.count)] + name + [0x01, 0xbb]
    /// A success naming the bound address 10.0.0.1:4242.
    private static let success: [UInt8] = [5, 0, 0, 1, 10, 0, 0, 1, 0x10, 0x92]

    /// The steps of a handshake fed `answers`, split into chunks of at most `chunk` bytes
    /// (each `.send` followed by an empty feed, as the handler does); chunks after the reply
    /// join the established step's rest.
    private static func run(_ proxy: ProxyServer, _ answers: [UInt8], chunk: Int, host: String = "coder.example.test") -> (opening: [UInt8], steps: [ProxyHandshakeStep]) {
        guard var handshake = SOCKS5Handshake(proxy: proxy, host: host, port: 443) else { return ([], []) }
        let opening = handshake.opening()
        var steps: [ProxyHandshakeStep] = []
        var index = 0
        repeat {
            let piece = answers[index..<min(index + chunk, answers.count)]
            index += piece.count
            // Bytes after the reply are the target's: they join the rest.
            if case .established(let rest) = steps.last {
                steps[steps.count - 1] = .established(rest: rest + piece)
                continue
            }
            var step = handshake.feed(piece)
            while case .send = step {
                steps.append(step)
                step = handshake.feed(EmptyCollection())
            }
            if step != .incomplete { steps.append(step) }
        } while index < answers.count
        return (opening, steps)
    }

    @Test(arguments: [1, 2, 3, 7, 64])
    func withoutCredentialsItOffersNoAuthenticationAndConnectsByName(chunk: Int) {
        let (opening, steps) = Self.run(Self.anonymous, [5, 0] + Self.success + Array("target".utf8), chunk: chunk)
        #expect(opening == [5, 1, 0])
        #expect(steps == [.send(Self.connectByName), .established(rest: Array("target".utf8))])
    }

    /// Username/password when the proxy chooses it; the proxy's answers arriving ahead of
    /// the agent's messages (one chunk) change nothing.
    @Test(arguments: [1, 2, 5, 64])
    func withCredentialsItAuthenticatesWhenAsked(chunk: Int) {
        let bound6: [UInt8] = [5, 0, 0, 4] + [UInt8](repeating: 0, count: 15) + [1] + [0, 80]
        let (opening, steps) = Self.run(Self.withCredentials, [5, 2, 1, 0] + bound6, chunk: chunk)
        #expect(opening == [5, 2, 0, 2])
        #expect(steps == [.send([1, 5] + Array("agent".utf8) + [2] + Array("pw".utf8)), .send(Self.connectByName), .established(rest: [])])
        // A proxy that needs none skips the exchange.
        #expect(Self.run(Self.withCredentials, [5, 0] + Self.success, chunk: chunk).steps == [.send(Self.connectByName), .established(rest: [])])
    }

    /// A reply naming its bound address by name is read whole before the target's bytes.
    @Test func aReplyNamingAHostIsReadWhole() {
        let reply: [UInt8] = [5, 0, 0, 3, 4] + Array("host".utf8) + [0, 1]
        for chunk in 1...reply.count + 2 {
            #expect(Self.run(Self.anonymous, [5, 0] + reply + [0xAA], chunk: chunk).steps.last == .established(rest: [0xAA]))
        }
        #expect(Self.run(Self.anonymous, [5, 0] + reply.dropLast(), chunk: 64).steps == [.send(Self.connectByName)])
    }

    @Test func addressesGoAsAddresses() throws {
        func request(_ host: String) throws -> [UInt8] {
            let steps = Self.run(Self.anonymous, [5, 0], chunk: 2, host: host).steps
            guard case .send(let bytes) = try #require(steps.first) else { return [] }
            return bytes
        }
        #expect(try request("10.1.2.3") == [5, 1, 0, 1, 10, 1, 2, 3, 0x01, 0xbb])
        #expect(try request("::ffff:10.1.2.3") == [5, 1, 0, 1, 10, 1, 2, 3, 0x01, 0xbb])
        #expect(try request("fd00::1") == [5, 1, 0, 4, 0xfd] + [UInt8](repeating: 0, count: 14) + [1, 0x01, 0xbb])
        // A zone is not an address to Go's ParseIP either: it goes by name.
        #expect(try request("fe80::1%eth0").prefix(5) == [5, 1, 0, 3, 12])
        #expect(SOCKS5Handshake(proxy: Self.anonymous, host: String(repeating: "a", count: 255), port: 1) != nil)
        #expect(SOCKS5Handshake(proxy: Self.anonymous, host: String(repeating: "a", count: 256), port: 1) == nil)
        #expect(SOCKS5Handshake(proxy: Self.anonymous, host: "", port: 1) == nil)
        // A port the two bytes cannot hold is refused, never cut to 16 bits.
        #expect(SOCKS5Handshake(proxy: Self.anonymous, host: "a", port: 70000) == nil)
        #expect(SOCKS5Handshake(proxy: Self.anonymous, host: "a", port: 0) == nil)
        #expect(SOCKS5Handshake(proxy: Self.anonymous, host: "a", port: 65535) != nil)
    }

    @Test(arguments: [
        ([UInt8]([4, 0]), false, "unexpected protocol version 4"),
        ([5, 0xff], true, "no acceptable authentication methods"),
        ([5, 2], false, "unsupported authentication method 2"),
        ([5, 3], true, "unsupported authentication method 3"),
        ([5, 2, 2, 0], true, "invalid username/password version"),
        ([5, 2, 1, 1], true, "username/password authentication failed"),
        ([5, 0, 4, 0, 0, 1], false, "unexpected protocol version 4"),
        ([5, 0, 5, 0, 1, 1], false, "non-zero reserved field"),
        ([5, 0, 5, 0, 0, 9], false, "unknown address type 9"),
    ])
    func aBrokenAnswerFailsInGosWords(answers: [UInt8], credentials: Bool, reason: String) {
        let proxy = credentials ? Self.withCredentials : Self.anonymous
        for chunk in [1, 64] {
            let last = Self.run(proxy, answers + [0, 0, 0, 0], chunk: chunk).steps.last
            #expect(last == .failed(.socksFailed(proxy: proxy, target: "coder.example.test:443", reason: reason)), "chunk \(chunk)")
        }
    }

    @Test func aRefusalNamesItsReason() {
        let refused = Self.run(Self.anonymous, [5, 0, 5, 2, 0, 1, 0, 0, 0, 0, 0, 0], chunk: 64).steps.last
        #expect(refused == .failed(.socksRefused(proxy: Self.anonymous, target: "coder.example.test:443", reason: "connection not allowed by ruleset")))
        #expect(SOCKS5Handshake.replyText(9) == "unknown code: 9")
        // A refusal is known from the reply's 4-byte head: a proxy that closes after it is
        // still reported with its reason.
        let short = Self.run(Self.anonymous, [5, 0, 5, 5, 0, 1], chunk: 64).steps.last
        #expect(short == .failed(.socksRefused(proxy: Self.anonymous, target: "coder.example.test:443", reason: "connection refused")))
    }

    /// Go refuses an empty user or a field over 255 bytes once the proxy asks for them.
    @Test func credentialsSOCKS5CannotCarryFailWhenAsked() {
        for (user, password) in [("", "pw"), (String(repeating: "u", count: 256), "pw"), ("agent", String(repeating: "p", count: 256))] {
            let proxy = ProxyServer(kind: .socks5, host: "127.0.0.1", port: 1080, username: user, password: password)
            #expect(Self.run(proxy, [5, 2], chunk: 2).steps == [.failed(.socksFailed(proxy: proxy, target: "coder.example.test:443", reason: "invalid username/password"))])
            #expect(Self.run(proxy, [5, 0] + Self.success, chunk: 2).steps.last == .established(rest: []))
        }
    }

    /// Through the handler: nothing behind it is active, and its writes wait, until the proxy
    /// has connected; then the target's first bytes pass on.
    @Test func theHandlerHoldsTheConnectionUntilTheProxyConnected() throws {
        let channel = EmbeddedChannel()
        let behind = ActiveCounter()
        try channel.pipeline.syncOperations.addHandler(behind)
        try ProxyRoute.socks(Self.withCredentials).addHandlers(to: channel.pipeline.syncOperations, host: "coder.example.test", port: 443)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1080)).wait()
        func written() throws -> [UInt8] {
            var bytes: [UInt8] = []
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) { bytes += buffer.readableBytesView }
            return bytes
        }
        #expect(try written() == [5, 2, 0, 2])
        channel.writeAndFlush(channel.allocator.buffer(string: "hello"), promise: nil)
        try channel.writeInbound(channel.allocator.buffer(bytes: [5, 2]))
        #expect(try written() == [1, 5] + Array("agent".utf8) + [2] + Array("pw".utf8))
        try channel.writeInbound(channel.allocator.buffer(bytes: [1, 0]))
        #expect(try written() == Self.connectByName)
        #expect(behind.active == 0)
        try channel.writeInbound(channel.allocator.buffer(bytes: Self.success + Array("first".utf8)))
        #expect(behind.active == 1)
        #expect(try written() == Array("hello".utf8))
        #expect(behind.read == Array("first".utf8))
        _ = try channel.finish()
    }

    /// Records what reaches the handlers behind the proxy's.
    private final class ActiveCounter: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        var active = 0
        var read: [UInt8] = []
        func channelActive(context: ChannelHandlerContext) { active += 1 }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { read += unwrapInboundIn(data).readableBytesView }
    }
}
