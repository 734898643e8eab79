import AgentTestSupport
import DERP
import DERPRelayDouble
import OutboundProxy
import Testing

/// A DERP relay through a real proxy (Debian's tinyproxy): `HTTPS_PROXY`'s `CONNECT` to the
/// node's name and port, TLS inside the tunnel, as Tailscale's client reaches a relay.
@Suite(.timeLimit(.minutes(3)))
struct DERPProxyTests {
    @Test func aRelayIsReachedThroughTheProxysTunnel() async throws {
        let proxy = try await TinyProxy.start()
        defer { proxy.stop() }
        try await DERPTest.withRelay(tls: true) { relay in
            var node = relay.node()
            // Not a loopback name, so the proxy is used; the tunnel goes to the name, not to
            // the IPv4 override.
            node.hostName = "0.0.0.0"
            node.ipv4 = "192.0.2.1"
            var configuration = DERPTest.fast
            configuration.proxies = ProxyEnvironment(environment: ["HTTPS_PROXY": proxy.url(), "HTTP_PROXY": "http://127.0.0.1:9"])
            let client = await DERPTest.client(relay, node: node, configuration: configuration)
            #expect(client.state.phase == .connected)
            #expect(proxy.requests().first == "CONNECT 0.0.0.0:\(relay.port) HTTP/1.1")
            await client.close()
        }
    }
}
