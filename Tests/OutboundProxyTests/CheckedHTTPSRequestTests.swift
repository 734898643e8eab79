import AgentTestSupport
import Foundation
import NIOCore
import NIOHTTP1
import Testing

#if canImport(Glibc)
import Glibc
#endif

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
        #expect(CheckedHTTPSClient.Request(method: .GET, url: "https://10.0.0.1:70000/") == nil, "a port past 65535")
        #expect(CheckedHTTPSClient.Request(method: .GET, url: "https://10.0.0.1:0/") == nil)
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

/// A request cancelled while its connect is under way ends at once. The listener's accept
/// queue is full, so the kernel drops the SYNs and the connect stays in SYN_SENT; with a
/// connect timeout and deadline longer than the suite's time limit, a cancellation that did
/// not reach the connect would fail the suite by its limit.
@Suite(.timeLimit(.minutes(2)))
struct CheckedHTTPSCancellationTests {
    @Test func cancellingDuringTheConnectEndsTheRequest() async throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        try #require(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0 }
        }
        try #require(bound && listen(listener, 0) == 0)
        let port = Int(UInt16(bigEndian: address.sin_port))
        // One connection fills a queue of 0; it is never accepted.
        let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(filler) }
        let filled = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(filler, $0, length) } }
        try #require(filled == 0)
        let client = try CheckedHTTPSClient(route: .direct, connectTimeout: .minutes(10))
        let request = try #require(CheckedHTTPSClient.Request(method: .GET, url: "https://127.0.0.1:\(port)/x"))
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
        #expect(Self.connectsInProgress(toPort: port) == 0, "the attempt is closed")
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
