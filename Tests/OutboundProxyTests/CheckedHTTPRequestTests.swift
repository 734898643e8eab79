import AgentTestSupport
import Foundation
import NIOCore
import NIOHTTP1
import Testing

#if canImport(Glibc)
import Glibc
#endif

@testable import OutboundProxy

/// The request the checked client writes: the target's `Host`, the body's framing, and the
/// caller's headers without those the request sets itself (as Go's `Request.Write`); to a
/// forwarding proxy, the absolute URL and the proxy's credentials.
@Suite struct CheckedHTTPRequestTests {
    @Test func theHeadNamesTheTargetAndFramesTheBody() throws {
        let request = try #require(
            CheckedHTTPClient.Request(
                method: .POST, url: "https://[2001:db8::1]:8443/api/v2/x?a=b%20c",
                headers: [("Coder-Session-Token", "t"), ("host", "elsewhere"), ("Content-Length", "99"), ("Connection", "keep-alive")],
                body: Array("{}".utf8)))
        let head = request.head(on: .direct)
        #expect(head.uri == "/api/v2/x?a=b%20c")
        #expect(
            head.headers.map { "\($0.name): \($0.value)" } == [
                "Host: [2001:db8::1]:8443", "Coder-Session-Token: t", "Content-Length: 2", "Connection: close",
            ])
        #expect(request.host == "2001:db8::1")
        #expect(request.secure)
    }

    @Test func aMethodWithoutItsBodySaysSoAndAGetSaysNothing() throws {
        let post = try #require(CheckedHTTPClient.Request(method: .POST, url: "https://coder.example.test"))
        #expect(post.head(on: .direct).headers["Content-Length"] == ["0"])
        #expect(post.head(on: .direct).headers["Host"] == ["coder.example.test"])
        #expect(post.head(on: .direct).uri == "/")
        // A port written in the URL stays in `Host`, the scheme's default too, as Go sends it.
        let get = try #require(CheckedHTTPClient.Request(method: .GET, url: "https://coder.example.test:443/x"))
        #expect(get.head(on: .direct).headers["Content-Length"].isEmpty)
        #expect(get.head(on: .direct).headers["Host"] == ["coder.example.test:443"])
    }

    /// Plain http: a forwarding proxy gets the absolute URL and its credentials (replacing
    /// the caller's, as Go's transport sets them); a tunnel or SOCKS proxy the origin form.
    @Test func aForwardedRequestNamesItsWholeURL() throws {
        let request = try #require(
            CheckedHTTPClient.Request(method: .GET, url: "http://metadata.example:80/latest?x=1", headers: [("Proxy-Authorization", "theirs")]))
        #expect(!request.secure)
        let proxy = ProxyServer(kind: .http, host: "127.0.0.1", port: 3128, username: "agent", password: "secret")
        let forwarded = request.head(on: .forward(proxy))
        #expect(forwarded.uri == "http://metadata.example:80/latest?x=1")
        #expect(forwarded.headers["Host"] == ["metadata.example:80"])
        #expect(forwarded.headers["Proxy-Authorization"] == [try #require(proxy.authorization)])
        let direct = request.head(on: .socks(ProxyServer(kind: .socks5, host: "127.0.0.1", port: 1080)))
        #expect(direct.uri == "/latest?x=1")
        #expect(direct.headers["Proxy-Authorization"] == ["theirs"])
        let other = try #require(CheckedHTTPClient.Request(method: .GET, url: "http://10.0.0.1:8080/"))
        #expect(other.head(on: .forward(proxy)).uri == "http://10.0.0.1:8080/")
    }

    @Test func onlyHTTPAndHTTPSURLsMakeARequest() {
        #expect(CheckedHTTPClient.Request(method: .GET, url: "ftp://coder.example.test/") == nil)
        #expect(CheckedHTTPClient.Request(method: .GET, url: "https:///path") == nil)
        #expect(CheckedHTTPClient.Request(method: .GET, url: "not a url") == nil)
        #expect(CheckedHTTPClient.Request(method: .GET, url: "https://10.0.0.1:70000/") == nil, "a port past 65535")
        #expect(CheckedHTTPClient.Request(method: .GET, url: "http://10.0.0.1:0/") == nil)
    }
}

/// Which route a request takes (Go's `ProxyFromEnvironment` and its transport's use of it),
/// and none that would send https in the clear.
@Suite struct CheckedHTTPRouteTests {
    @Test func theEnvironmentChoosesTheRoute() throws {
        let http = ProxyServer(kind: .http, host: "127.0.0.1", port: 3128)
        let socks = ProxyServer(kind: .socks5, host: "127.0.0.1", port: 1080)
        let viaHTTP = ProxyEnvironment(environment: ["HTTP_PROXY": "http://127.0.0.1:3128", "HTTPS_PROXY": "http://127.0.0.1:3128"])
        #expect(try ProxyRoute.choose(url: "https://coder.example.test/", environment: viaHTTP, anyProxyKind: true) == .tunnel(http))
        #expect(try ProxyRoute.choose(url: "http://coder.example.test/", environment: viaHTTP, anyProxyKind: true) == .forward(http))
        #expect(try ProxyRoute.choose(url: "http://127.0.0.1/", environment: viaHTTP, anyProxyKind: true) == .direct)
        let viaSOCKS = ProxyEnvironment(environment: ["HTTP_PROXY": "socks5://127.0.0.1:1080", "HTTPS_PROXY": "socks5h://127.0.0.1"])
        #expect(try ProxyRoute.choose(url: "https://coder.example.test/", environment: viaSOCKS, anyProxyKind: true) == .socks(socks))
        #expect(try ProxyRoute.choose(url: "http://coder.example.test/", environment: viaSOCKS, anyProxyKind: true) == .socks(socks))
        #expect(throws: ProxyError.self) { try ProxyRoute.choose(url: "https://coder.example.test/", environment: viaSOCKS) }
        let credentials = ProxyEnvironment(environment: ["HTTPS_PROXY": "socks5://u:p@127.0.0.1:1080"])
        let withCredentials = ProxyServer(kind: .socks5, host: "127.0.0.1", port: 1080, username: "u", password: "p")
        #expect(try ProxyRoute.choose(url: "https://coder.example.test/", environment: credentials, anyProxyKind: true) == .socks(withCredentials))
        // An https:// proxy: the same routes, reached over TLS; not for DERP's dials.
        let overTLS = ProxyEnvironment(environment: ["HTTPS_PROXY": "https://127.0.0.1:3129", "HTTP_PROXY": "https://127.0.0.1:3129"])
        let https = ProxyServer(kind: .https, host: "127.0.0.1", port: 3129)
        #expect(try ProxyRoute.choose(url: "https://coder.example.test/", environment: overTLS, anyProxyKind: true) == .tunnel(https))
        #expect(try ProxyRoute.choose(url: "http://coder.example.test/", environment: overTLS, anyProxyKind: true) == .forward(https))
        #expect(try ProxyRoute.choose(url: "https://coder.example.test/", environment: overTLS, anyProxyKind: true).proxyTLS)
        #expect(throws: ProxyError.self) { try ProxyRoute.choose(url: "https://coder.example.test/", environment: overTLS) }
    }

    /// An https request on a forwarding route would go in the clear: refused before any
    /// connection (the proxy's port is closed, so a connect would fail otherwise).
    @Test func httpsIsNeverForwarded() async throws {
        let client = try CheckedHTTPClient(route: .forward(ProxyServer(kind: .http, host: "127.0.0.1", port: 9)))
        let request = try #require(CheckedHTTPClient.Request(method: .GET, url: "https://coder.example.test/"))
        await #expect {
            try await client.execute(request, deadline: .now() + .seconds(30)) { _, _ in }
        } throws: { error in
            "\(error)" == "proxy http://127.0.0.1:9: an https request is not forwarded in the clear"
        }
    }
}

/// The connect timeout covers the proxy's and TLS's handshakes, not TCP's alone; a SOCKS5
/// proxy's refusal or early close is the proxy's error, naming it and the target.
@Suite(.timeLimit(.minutes(2)))
struct CheckedHTTPSetupTests {
    /// A server that takes the connection and never answers TLS's hello: with no deadline of
    /// its own (as MCP's requests have none), the request ends at the connect timeout. Were
    /// the timeout TCP's alone, it would wait for the suite's limit.
    @Test func aHandshakeThatNeverEndsMeetsTheConnectTimeout() async throws {
        let silent = try await LoopbackListener { channel in channel.eventLoop.makeSucceededVoidFuture() }
        let client = try CheckedHTTPClient(route: .direct, connectTimeout: .seconds(2))
        let request = try #require(CheckedHTTPClient.Request(method: .GET, url: "https://127.0.0.1:\(silent.port)/x"))
        await #expect(throws: CheckedHTTPError.setupTimedOut) {
            try await client.execute(request, deadline: .distantFuture) { _, _ in }
        }
        await silent.close()
    }

    /// A proxy that takes the connection and never answers its handshake (`CONNECT`, or
    /// SOCKS5's greeting): the request ends at the connect timeout, with no TLS involved.
    @Test(arguments: [ProxyServer.Kind.http, .socks5])
    func aSilentProxyMeetsTheConnectTimeout(kind: ProxyServer.Kind) async throws {
        let silent = try await LoopbackListener { channel in channel.eventLoop.makeSucceededVoidFuture() }
        let proxy = ProxyServer(kind: kind, host: "127.0.0.1", port: silent.port)
        // (A forwarding HTTP proxy has no handshake: its request waits for its deadline.)
        let client = try CheckedHTTPClient(route: kind == .http ? .tunnel(proxy) : .socks(proxy), connectTimeout: .seconds(2))
        let request = try #require(CheckedHTTPClient.Request(method: .GET, url: "http://coder.example.test/x"))
        await #expect(throws: CheckedHTTPError.setupTimedOut) {
            try await client.execute(request, deadline: .distantFuture) { _, _ in }
        }
        await silent.close()
    }

    /// The credentials a test's proxy URL carries.
    enum Credentials: Sendable {
        /// As the stand-in's own URL has them.
        case proxys
        case none
        case wrongPassword
    }

    /// A refusal, an early close, and a proxy that wants credentials refusing a client without
    /// them or with the wrong ones: each says so, without the credentials. `seen` is what the
    /// proxy says it was asked.
    @Test(arguments: [
        (
            StandInProxy.Kind.socks5Refusing, Credentials.proxys,
            "proxy socks5://127.0.0.1:PORT refused to connect to coder.example.test:443: connection refused", "coder.example.test:443"
        ),
        (.socks5Closing, .proxys, "proxy socks5://127.0.0.1:PORT closed the connection before connecting to the target", "coder.example.test:443"),
        (
            .socks5Credentials, .none, "proxy socks5://127.0.0.1:PORT, connecting to coder.example.test:443: no acceptable authentication methods",
            "refused: no credentials offered"
        ),
        (
            .socks5Credentials, .wrongPassword,
            "proxy socks5://127.0.0.1:PORT, connecting to coder.example.test:443: username/password authentication failed",
            "refused: wrong credentials"
        ),
    ])
    func aSOCKSProxysRefusalIsItsError(kind: StandInProxy.Kind, credentials: Credentials, message: String, seen: String) async throws {
        let silent = try await LoopbackListener { channel in channel.eventLoop.makeSucceededVoidFuture() }
        let proxy = try #require(await StandInProxy.start(relayingTo: silent.port, as: kind))
        defer { proxy.stop() }
        let url =
            switch credentials {
            case .proxys: proxy.url
            case .none: "socks5://127.0.0.1:\(proxy.port)"
            case .wrongPassword: proxy.url(user: StandInProxy.user, password: "wrong")
            }
        let route = try ProxyRoute.choose(
            url: "https://coder.example.test/", environment: ProxyEnvironment(environment: ["HTTPS_PROXY": url]), anyProxyKind: true)
        let client = try CheckedHTTPClient(route: route)
        let request = try #require(CheckedHTTPClient.Request(method: .GET, url: "https://coder.example.test/x"))
        await #expect {
            try await client.execute(request, deadline: .now() + .seconds(60)) { _, _ in }
        } throws: { error in
            "\(error)" == message.replacingOccurrences(of: "PORT", with: "\(proxy.port)")
        }
        #expect(await proxy.nextTarget() == seen)
        await silent.close()
    }
}

/// A request cancelled while its connect is under way ends at once. The listener's accept
/// queue is full, so the kernel drops the SYNs and the connect stays in SYN_SENT; with a
/// connect timeout and deadline longer than the suite's time limit, a cancellation that did
/// not reach the connect would fail the suite by its limit.
@Suite(.timeLimit(.minutes(2)))
struct CheckedHTTPCancellationTests {
    @Test func cancellingDuringTheConnectEndsTheRequest() async throws {
        let (listener, port) = try #require(RawLoopbackListener.make(backlog: 0))
        defer { close(listener) }
        // One connection fills a queue of 0; it is never accepted.
        let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(filler) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let filled = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(filler, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(filled == 0)
        let client = try CheckedHTTPClient(route: .direct, connectTimeout: .minutes(10))
        let request = try #require(CheckedHTTPClient.Request(method: .GET, url: "https://127.0.0.1:\(port)/x"))
        let outcome = Task { () -> String in
            do {
                return try await client.execute(request, deadline: .now() + .minutes(10)) { head, _ in "answered \(head.status)" }
            } catch {
                return "\(error)"
            }
        }
        let started = await eventually(timeout: .seconds(60)) { Self.connectsInProgress(toPort: port) > 0 }
        #expect(started, "the connect is under way")
        outcome.cancel()
        #expect(await outcome.value == "CancellationError()")
        // The attempt's socket is closed on its event loop, after the cancellation returned.
        #expect(await eventually(timeout: .seconds(30)) { Self.connectsInProgress(toPort: port) == 0 }, "the attempt is closed")
    }

    /// Sockets in SYN_SENT toward 127.0.0.1:`port` (`/proc/net/tcp`, read to its end: a
    /// single read returns only its first page).
    static func connectsInProgress(toPort port: Int) -> Int {
        let fd = open("/proc/net/tcp", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return 0 }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while bytes.count < 64 << 20 {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            bytes += chunk[..<count]
        }
        let table = String(decoding: bytes, as: UTF8.self)
        let remote = String(format: "0100007F:%04X", port)
        return table.split(separator: "\n").filter { line in
            let fields = line.split(separator: " ")
            return fields.count > 3 && fields[2] == remote && fields[3] == "02"
        }.count
    }
}
