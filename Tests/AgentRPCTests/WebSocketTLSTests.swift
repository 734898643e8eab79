import AgentTLS
import AgentRPC
import AgentTestSupport
import Foundation
import NIOCore
import NIOPosix
import OutboundProxy
import Synchronization
import Testing

/// The control plane's `wss://` dial, through a proxy that stands in for every server
/// (``StandInProxy``) or directly: the TLS server's certificate must name the control plane.
/// One that names only the connected address (127.0.0.1: the proxy's, or what `localhost`
/// resolved to; a check by the connected address accepts it) fails the dial before the upgrade, with the session token,
/// is written.
@Suite(.timeLimit(.minutes(3)))
struct WebSocketTLSTests {
    static let forbidden = "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

    /// The dial's outcome against a server that answers 403: the upgrade was written
    /// (`valid`), or the certificate was refused for `host` with nothing written.
    static func expectChecked(_ error: any Error, server: TLSTestServer, valid: Bool, host: String) {
        if valid {
            #expect(error as? DialError == .refused(status: 403, message: ""), "\(error)")
            #expect(server.text.hasPrefix("GET /api/v2/workspaceagents/me/rpc HTTP/1.1\r\n"), "\(server.text)")
        } else {
            #expect("\(error)".contains("not valid for \(host)"), "\(error)")
            #expect(server.text.isEmpty, "nothing, the token least of all, is written before the check")
        }
    }

    /// Through an HTTP proxy's tunnel or a SOCKS5 proxy, which is asked for the control plane
    /// by name.
    @Test(arguments: [("DNS:coder.example.test", true), ("IP:127.0.0.1,DNS:other.example.test", false)], [StandInProxy.Kind.http, .socks5, .socks5Credentials])
    func theCertificateMustNameTheControlPlane(names: (String, Bool), via kind: StandInProxy.Kind) async throws {
        let (names, valid) = names
        let (server, trusting, directory) = try await TLSTestServer.startTrusted(names: names, answer: Array(Self.forbidden.utf8))
        defer { try? FileManager.default.removeItem(atPath: directory) }
        guard let proxy = await StandInProxy.start(relayingTo: server.port, as: kind) else {
            await server.stop()
            Issue.record("the stand-in proxy did not start")
            return
        }
        defer { proxy.stop() }
        do {
            _ = try await WebSocketConnector.connect(
                url: "wss://coder.example.test/api/v2/workspaceagents/me/rpc", headers: [("Coder-Session-Token", "the-token")],
                proxies: ProxyEnvironment(environment: ["HTTPS_PROXY": proxy.url]), tlsConfiguration: trusting
            ) { _ in 0 }
            Issue.record("the dial succeeded")
        } catch {
            Self.expectChecked(error, server: server, valid: valid, host: "coder.example.test")
        }
        #expect(await proxy.nextTarget() == "coder.example.test:443")
        await server.stop()
    }

    /// Through an `https://` proxy: TLS to the proxy (its certificate naming its address),
    /// the control plane's TLS inside its tunnel, each checked against its own name.
    @Test(arguments: [("DNS:coder.example.test", true), ("IP:127.0.0.1,DNS:other.example.test", false)])
    func throughAnHTTPSProxyTheCertificateMustNameTheControlPlane(names: String, valid: Bool) async throws {
        let (server, trusting, directory) = try await TLSTestServer.startTrusted(names: names, answer: Array(Self.forbidden.utf8))
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (proxy, both, proxyDirectory) = try await TLSTestServer.httpsProxy(
            relayingTo: server.port, names: "IP:127.0.0.1", trusting: trusting, targetCertificate: directory + "/cert.pem")
        defer {
            proxy.stop()
            try? FileManager.default.removeItem(atPath: proxyDirectory)
        }
        do {
            _ = try await WebSocketConnector.connect(
                url: "wss://coder.example.test/api/v2/workspaceagents/me/rpc", headers: [("Coder-Session-Token", "the-token")],
                proxies: ProxyEnvironment(environment: ["HTTPS_PROXY": proxy.url]), tlsConfiguration: both
            ) { _ in 0 }
            Issue.record("the dial succeeded")
        } catch {
            Self.expectChecked(error, server: server, valid: valid, host: "coder.example.test")
        }
        #expect(await proxy.nextTarget() == "coder.example.test:443")
        await server.stop()
    }

    /// A plain `ws://` control plane through an `https://` proxy: TLS to the proxy, then the
    /// upgrade in plain text inside its tunnel (a WebSocket dial always tunnels, as Go's does).
    @Test func aPlainDialThroughAnHTTPSProxyTunnelsOverTLS() async throws {
        try await TLSTestServer.withPlainServerBehindHTTPSProxy(answer: Array(Self.forbidden.utf8)) { server, proxy, both in
            do {
                _ = try await WebSocketConnector.connect(
                    url: "ws://coder.example.test/api/v2/workspaceagents/me/rpc", headers: [("Coder-Session-Token", "the-token")],
                    proxies: ProxyEnvironment(environment: ["HTTP_PROXY": proxy.url]), tlsConfiguration: both
                ) { _ in 0 }
                Issue.record("the dial succeeded")
            } catch {
                #expect(error as? DialError == .refused(status: 403, message: ""), "\(error)")
            }
            #expect(await proxy.nextTarget() == "coder.example.test:80")
            #expect(server.text.hasPrefix("GET /api/v2/workspaceagents/me/rpc HTTP/1.1\r\nHost: coder.example.test\r\n"), "\(server.text)")
        }
    }

    @Test(arguments: [("DNS:localhost", true), ("IP:127.0.0.1", false)])
    func directlyTheCertificateMustNameTheHost(names: String, valid: Bool) async throws {
        let (server, trusting, directory) = try await TLSTestServer.startTrusted(names: names, answer: Array(Self.forbidden.utf8))
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            _ = try await WebSocketConnector.connect(
                url: "wss://localhost:\(server.port)/api/v2/workspaceagents/me/rpc", headers: [("Coder-Session-Token", "the-token")],
                proxies: .none, tlsConfiguration: trusting
            ) { _ in 0 }
            Issue.record("the dial succeeded")
        } catch {
            Self.expectChecked(error, server: server, valid: valid, host: "localhost")
        }
        await server.stop()
    }
}
