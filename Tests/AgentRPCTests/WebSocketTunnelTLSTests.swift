import AgentRPC
import AgentTestSupport
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import OutboundProxy
import Synchronization
import Testing

/// The control plane's `wss://` dial through a proxy that stands in for every server
/// (``StandInProxy``): the TLS server's certificate must name the control plane. One that
/// names only the proxy's address (127.0.0.1, which NIOSSL accepts as the connected address)
/// fails the dial before the upgrade, with the session token, is written.
@Suite(.timeLimit(.minutes(3)))
struct WebSocketTunnelTLSTests {
    @Test(arguments: [("DNS:coder.example.test", true), ("IP:127.0.0.1,DNS:other.example.test", false)])
    func theCertificateMustNameTheControlPlane(names: String, valid: Bool) async throws {
        let (certificate, key, directory) = try await TLSTestServer.certificate(names)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try await TLSTestServer.start(
            certificate: certificate, key: key, answer: "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        guard let proxy = await StandInProxy.start(relayingTo: server.port) else {
            await server.stop()
            Issue.record("the stand-in proxy did not start")
            return
        }
        defer { proxy.stop() }
        var trusting = TLSConfiguration.makeClientConfiguration()
        trusting.trustRoots = .file(certificate)
        do {
            _ = try await WebSocketConnector.connect(
                url: "wss://coder.example.test/api/v2/workspaceagents/me/rpc", headers: [("Coder-Session-Token", "the-token")],
                proxies: ProxyEnvironment(environment: ["HTTPS_PROXY": proxy.url]), tlsConfiguration: trusting
            ) { _ in 0 }
            Issue.record("the dial succeeded")
        } catch {
            if valid {
                #expect(error as? DialError == .refused(status: 403, message: ""), "\(error)")
                #expect(server.text.hasPrefix("GET /api/v2/workspaceagents/me/rpc HTTP/1.1\r\n"), "\(server.text)")
            } else {
                #expect("\(error)".contains("not valid for coder.example.test"), "\(error)")
                #expect(server.text.isEmpty, "nothing, the token least of all, is written before the check")
            }
        }
        await server.stop()
    }
}
