import AgentCore
import AgentTestSupport
import Foundation
import NIOCore
import NIOHTTP1
import OutboundProxy
import Testing

@testable import MCPEngine

/// An HTTP MCP server behind a real proxy (Debian's tinyproxy), as the reference reaches one
/// (`ProxyFromEnvironment`): the server's origin picks the proxy, `NO_PROXY` and loopback
/// keep it direct, and a proxy the client cannot use fails each request with the reason. The
/// server is addressed as `0.0.0.0`: 127.0.0.1 is never proxied.
@Suite(.timeLimit(.minutes(3)))
struct MCPHTTPProxyTests {
    private static let initialize = Array(#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#.utf8)

    private func initialize(_ connection: MCPHTTPConnection, _ url: String) async throws(MCPHTTPFailure) -> UInt {
        try await connection.execute(
            .POST, URL(string: url)!, headers: [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")],
            body: Self.initialize, deadline: .now() + .seconds(30), replayable: true
        ) { response, _ in
            _ = await MCPHTTPConnection.statusText(response, deadline: .now() + .seconds(30))
            return response.status.code
        }
    }

    @Test func requestsGoThroughTheProxyThatTheOriginPicks() async throws {
        let proxy = try await TinyProxy.start()
        defer { proxy.stop() }
        let server = try await MCPHTTPTestServer.start("not_mcp_http.py", ["json"])
        let url = "http://0.0.0.0:\(server.port)/mcp"
        let origin = try #require(MCPHTTPOrigin(URL(string: url)!))
        let proxied = MCPHTTPConnection(
            serverName: "s", origin: origin, headers: [:], connectTimeout: .seconds(10),
            proxies: ProxyEnvironment(environment: ["HTTP_PROXY": proxy.url(), "HTTPS_PROXY": "http://127.0.0.1:9"]))
        #expect(try await initialize(proxied, url) == 200)
        // Plain http is forwarded to the proxy, as Go's transport sends it.
        #expect(proxy.requests() == ["POST http://0.0.0.0:\(server.port)/mcp HTTP/1.1"])
        // NO_PROXY names the server: direct, the proxy sees nothing more.
        let exempt = MCPHTTPConnection(
            serverName: "s", origin: origin, headers: [:], connectTimeout: .seconds(10),
            proxies: ProxyEnvironment(environment: ["HTTP_PROXY": proxy.url(), "NO_PROXY": "0.0.0.0"]))
        #expect(try await initialize(exempt, url) == 200)
        #expect(proxy.requests().count == 1)
        await server.process.close()
    }

    @Test func aProxyTheClientCannotUseFailsEachRequestWithTheReason() async throws {
        let url = "https://mcp.example.com/mcp"
        let origin = try #require(MCPHTTPOrigin(URL(string: url)!))
        let connection = MCPHTTPConnection(
            serverName: "s", origin: origin, headers: [:], connectTimeout: .seconds(10),
            proxies: ProxyEnvironment(environment: ["HTTPS_PROXY": "ftp://proxy.example:3129"]))
        do {
            _ = try await initialize(connection, url)
            Issue.record("sent without its proxy")
        } catch {
            guard case .connection(let text) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(text == "POST https://mcp.example.com/mcp: invalid proxy address in HTTP_PROXY or HTTPS_PROXY")
        }
    }
}
