import AgentCore
import AgentProto
import AgentRPC
import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Logging
import NIOHTTP1
import OutboundProxy
import Synchronization
import Testing
import Yamux

/// The control plane through a real proxy (Debian's tinyproxy): the RPC WebSocket tunnels
/// through `CONNECT`, plain http REST requests are forwarded to the proxy, and `NO_PROXY` and
/// loopback keep them direct. The double is addressed as `0.0.0.0`: 127.0.0.1 is never
/// proxied.
@Suite(.timeLimit(.minutes(3)))
struct ControlPlaneProxyTests {
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    @Test func theRPCConnectionAndRESTGoThroughTheProxy() async throws {
        let proxy = try await TinyProxy.start(credentials: ("agent", "pa-ss"))
        defer { proxy.stop() }
        let double = ControlPlaneDouble()
        try await double.run { url in
            let base = TinyProxy.proxiable(url)
            let port = base.split(separator: ":").last.map(String.init) ?? ""
            // The password percent-encoded in the URL: decoded before it is sent.
            let proxies = ProxyEnvironment(environment: ["HTTP_PROXY": proxy.url(user: "agent", password: "pa%2Dss")])
            let session = try await WebSocketDialer(baseURL: base, token: double.token, version: "2.10", logger: Self.quiet, proxies: proxies)
                .dial()
            let manifest = try await AgentAPIClient(session: session).getManifest()
            #expect(manifest.agentName == "main")
            await session.close()
            #expect(proxy.requests() == ["CONNECT 0.0.0.0:\(port) HTTP/1.1"])

            let rest = CoderRESTClient(baseURL: base, token: double.token, proxies: proxies)
            let answer = try await rest.send(.GET, ControlPlaneDouble.gitSSHKeyPath)
            // Forwarded, as Go's transport sends plain http, with the proxy's credentials: the
            // double's own answer (no key is set), not the proxy's 407.
            #expect(answer.status == 500 && String(decoding: answer.body, as: UTF8.self).contains("git SSH key"), "\(answer.status)")
            #expect(proxy.requests().count == 2)
            #expect(proxy.requests().last == "GET http://0.0.0.0:\(port)\(ControlPlaneDouble.gitSSHKeyPath) HTTP/1.1")
        }
    }

    @Test func noProxyAndLoopbackStayDirect() async throws {
        let proxy = try await TinyProxy.start()
        defer { proxy.stop() }
        let double = ControlPlaneDouble()
        try await double.run { url in
            let base = TinyProxy.proxiable(url)
            let exempt = ProxyEnvironment(environment: ["HTTP_PROXY": proxy.url(), "NO_PROXY": "example.com,0.0.0.0"])
            let session = try await WebSocketDialer(baseURL: base, token: double.token, version: "2.10", logger: Self.quiet, proxies: exempt)
                .dial()
            await session.close()
            // 127.0.0.1 with the proxy set and no NO_PROXY: direct (Go's loopback rule).
            let all = ProxyEnvironment(environment: ["HTTP_PROXY": proxy.url()])
            let loopback = try await WebSocketDialer(baseURL: url, token: double.token, version: "2.10", logger: Self.quiet, proxies: all).dial()
            await loopback.close()
            #expect(proxy.requests().isEmpty)
            #expect(double.recorded.withLock { $0.connections } == 2)
        }
    }

    @Test func aProxyThatRefusesFailsTheDialWithItsAnswer() async throws {
        let proxy = try await TinyProxy.start(credentials: ("agent", "secret"))
        defer { proxy.stop() }
        let double = ControlPlaneDouble()
        try await double.run { url in
            let base = TinyProxy.proxiable(url)
            let proxies = ProxyEnvironment(environment: ["HTTP_PROXY": proxy.url()])
            do {
                _ = try await WebSocketDialer(baseURL: base, token: double.token, version: "2.10", logger: Self.quiet, proxies: proxies).dial()
                Issue.record("dialed through a proxy that wants credentials")
            } catch {
                #expect(String(describing: error).contains("407"))
                #expect(String(describing: error).contains("http://127.0.0.1:\(proxy.port)"))
            }
            #expect(double.recorded.withLock { $0.connections } == 0)
        }
    }
}
