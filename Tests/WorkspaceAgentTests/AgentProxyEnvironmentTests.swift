import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Synchronization
import Testing

/// The agent binary reads `HTTP_PROXY` from its environment and reaches its control plane
/// through that proxy (Debian's tinyproxy, with credentials): the RPC connection tunnels
/// through `CONNECT`, the lifecycle arrives, and the proxy's credentials never reach the log.
/// The double is addressed as `0.0.0.0`: 127.0.0.1 is never proxied.
@Suite(.timeLimit(.minutes(3)))
struct AgentProxyEnvironmentTests {
    @Test func theControlPlaneIsReachedThroughTheEnvironmentsProxy() async throws {
        let proxy = try await TinyProxy.start(credentials: ("agent", "proxysecret"))
        defer { proxy.stop() }
        let double = ControlPlaneDouble()
        try await double.run { url in
            let base = TinyProxy.proxiable(url)
            let port = base.split(separator: ":").last.map(String.init) ?? ""
            let agent = try AgentDaemon.launch(
                ["--http-address", "127.0.0.1:0", "--agent-url", base],
                environment: ["CODER_AGENT_TOKEN": double.token, "HTTP_PROXY": proxy.url(user: "agent", password: "proxysecret")])
            defer { agent.cleanup() }
            _ = try await agent.port()
            #expect(await eventually(timeout: .seconds(60)) { double.recorded.withLock { $0.lifecycle.count } == 2 }, "\(agent.log)")
            // The RPC's WebSocket through the tunnel; the REST calls (the reinit watch) forwarded.
            #expect(proxy.requests().contains("CONNECT 0.0.0.0:\(port) HTTP/1.1"), "\(proxy.requests())")
            #expect(
                await eventually(timeout: .seconds(60)) {
                    proxy.requests().contains { $0.hasPrefix("GET http://0.0.0.0:\(port)/api/v2/workspaceagents/me/reinit") }
                }, "\(proxy.requests())")
            agent.signal(SIGTERM)
            #expect(await agent.exitStatus() == 0, "\(agent.log)")
            // Neither the password, nor its Basic form (base64 of `agent:proxysecret`), nor the URL.
            let log = agent.log
            #expect(!log.contains("proxysecret") && !log.contains("YWdlbnQ6cHJveHlzZWNyZXQ=") && !log.contains("agent:proxy"))
        }
    }
}
