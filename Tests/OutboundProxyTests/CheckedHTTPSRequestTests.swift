import NIOHTTP1
import Testing

@testable import OutboundProxy

/// The request a checked HTTPS client writes: the target's `Host`, the body's framing, and
/// the caller's headers without those the request sets itself (as Go's `Request.Write`).
@Suite struct CheckedHTTPSRequestTests {
    @Test func theHeadNamesTheTargetAndFramesTheBody() throws {
        let request = try #require(
            CheckedHTTPSClient.Request(
                method: .POST, url: "https://[2001:db8::1]:8443/api/v2/x?a=b%20c",
                headers: [("Coder-Session-Token", "t"), ("host", "elsewhere"), ("Content-Length", "99"), ("Connection", "keep-alive")],
                body: Array("{}".utf8)))
        let head = request.head
        #expect(head.uri == "/api/v2/x?a=b%20c")
        #expect(
            head.headers.map { "\($0.name): \($0.value)" } == [
                "Host: [2001:db8::1]:8443", "Coder-Session-Token: t", "Content-Length: 2", "Connection: close",
            ])
        #expect(request.host == "2001:db8::1")
    }

    @Test func aMethodWithoutItsBodySaysSoAndAGetSaysNothing() throws {
        let post = try #require(CheckedHTTPSClient.Request(method: .POST, url: "https://coder.example.test"))
        #expect(post.head.headers["Content-Length"] == ["0"])
        #expect(post.head.headers["Host"] == ["coder.example.test"])
        #expect(post.head.uri == "/")
        let get = try #require(CheckedHTTPSClient.Request(method: .GET, url: "https://coder.example.test:443/x"))
        #expect(get.head.headers["Content-Length"].isEmpty)
        #expect(get.head.headers["Host"] == ["coder.example.test"])
    }

    @Test func onlyHTTPSURLsMakeARequest() {
        #expect(CheckedHTTPSClient.Request(method: .GET, url: "http://coder.example.test/") == nil)
        #expect(CheckedHTTPSClient.Request(method: .GET, url: "https:///path") == nil)
        #expect(CheckedHTTPSClient.Request(method: .GET, url: "not a url") == nil)
    }
}

/// Which routes a checked client takes: none that would send https in the clear or through
/// a proxy it cannot speak to.
@Suite struct CheckedHTTPSRouteTests {
    @Test func directAndHTTPTunnelsOnly() throws {
        let http = ProxyServer(kind: .http, host: "127.0.0.1", port: 3128)
        _ = try CheckedHTTPSClient(route: .direct)
        _ = try CheckedHTTPSClient(route: .tunnel(http))
        #expect(throws: ProxyError.self) { _ = try CheckedHTTPSClient(route: .forward(http)) }
        #expect(throws: ProxyError.self) {
            _ = try CheckedHTTPSClient(route: .tunnel(ProxyServer(kind: .socks5, host: "127.0.0.1", port: 1080)))
        }
    }
}
