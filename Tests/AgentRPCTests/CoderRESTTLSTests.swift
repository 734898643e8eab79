import AgentTLS
import AgentCore
import AgentRPC
import AgentTestSupport
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import OutboundProxy
import Synchronization
import Testing

/// coderd's REST API at an `https://` access URL, through an HTTP proxy's tunnel or a SOCKS5
/// proxy (``StandInProxy`` relays every connection to one TLS server) or directly: coderd's
/// certificate is checked against the access URL's host, never only the connected address.
/// AsyncHTTPClient, which carried these requests before, accepts a certificate naming the
/// connected address (the proxy's 127.0.0.1, or wherever DNS pointed) and sent the token to
/// whoever held one.
@Suite(.timeLimit(.minutes(3)))
struct CoderRESTTLSTests {
    static let ok = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}"

    /// A TLS server with a certificate for `names` behind a stand-in proxy of `kind`, and a
    /// REST client for `base` through it that trusts that certificate.
    static func withServer(
        names: String, answer: [UInt8]?, close: Bool = false, base: String = "https://coder.example.test",
        via kind: StandInProxy.Kind = .http, _ body: (TLSTestServer, CoderRESTClient, StandInProxy) async throws -> Void
    ) async throws {
        let (server, trusting, directory) = try await TLSTestServer.startTrusted(names: names, answer: answer, close: close)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        guard let proxy = await StandInProxy.start(relayingTo: server.port, as: kind) else {
            await server.stop()
            Issue.record("the stand-in proxy did not start")
            return
        }
        defer { proxy.stop() }
        let rest = CoderRESTClient(
            baseURL: base, token: "the-token", headers: [("X-Deployment", "d1")],
            proxies: ProxyEnvironment(environment: ["HTTPS_PROXY": proxy.url]), tlsConfiguration: trusting)
        do {
            try await body(server, rest, proxy)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    /// A user and password in the access URL are sent as Basic authorization, as Go's client
    /// sends them, and never shown: the URL requests go to and errors name has none. Before,
    /// they were sent nowhere and printed in every error.
    @Test func credentialsInTheAccessURLAreSentAndNeverShown() async throws {
        let base = "https://us%40er:p%3Ass@coder.example.test"
        try await Self.withServer(names: "DNS:coder.example.test", answer: Array(Self.ok.utf8), base: base) { server, rest, _ in
            #expect(rest.baseURL == "https://coder.example.test")
            let answer = try await rest.send(.GET, "/api/v2/x")
            #expect(answer.status == 200)
            // base64("us@er:p:ss")
            #expect(server.text.contains("\r\nAuthorization: Basic dXNAZXI6cDpzcw==\r\n"), "\(server.text)")
        }
        let refused = CoderRESTClient(baseURL: "http://u:secret@127.0.0.1:1", token: nil, proxies: ProxyEnvironment(environment: [:]))
        let error = await #expect(throws: CoderRESTError.self) { try await refused.send(.GET, "/api/v2/x", timeout: .seconds(20)) }
        #expect(error.map { !"\($0)".contains("secret") && "\($0)".contains("http://127.0.0.1:1/api/v2/x") } == true, "\(String(describing: error))")
    }

    /// Through either kind of proxy, which is asked for the access URL's host by name.
    @Test(arguments: [StandInProxy.Kind.http, .socks5, .socks5Credentials])
    func aRequestArrivesWholeAndItsAnswerIsRead(via kind: StandInProxy.Kind) async throws {
        try await Self.withServer(names: "DNS:coder.example.test", answer: Array(Self.ok.utf8), via: kind) { server, rest, proxy in
            let answer = try await rest.send(.POST, "/api/v2/x", query: [("a", "b c")], json: Array(#"{"n":1}"#.utf8))
            #expect(await proxy.nextTarget() == "coder.example.test:443")
            #expect(answer.status == 200)
            #expect(answer.body == Array(#"{"ok":true}"#.utf8))
            let text = server.text
            #expect(text.hasPrefix("POST /api/v2/x?a=b%20c HTTP/1.1\r\nHost: coder.example.test\r\n"), "\(text)")
            for header in ["Coder-Session-Token: the-token", "X-Deployment: d1", "Content-Type: application/json", "Content-Length: 7"] {
                #expect(text.contains("\r\n\(header)\r\n"), "\(header) in \(text)")
            }
            #expect(text.hasSuffix("\r\n\r\n{\"n\":1}"), "\(text)")
        }
    }

    /// An `https://` proxy: the connection to it is TLS, its certificate checked against the
    /// proxy's own address, and the target's TLS runs inside its tunnel. A proxy whose
    /// certificate does not name it is refused before anything is sent through it.
    @Test(arguments: [true, false])
    func anHTTPSProxyIsReachedOverTLS(namesTheProxy: Bool) async throws {
        let (server, trusting, directory) = try await TLSTestServer.startTrusted(names: "DNS:coder.example.test", answer: Array(Self.ok.utf8))
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (proxy, both, proxyDirectory) = try await TLSTestServer.httpsProxy(
            relayingTo: server.port, names: namesTheProxy ? "IP:127.0.0.1" : "DNS:other.example.test", trusting: trusting,
            targetCertificate: directory + "/cert.pem")
        defer {
            proxy.stop()
            try? FileManager.default.removeItem(atPath: proxyDirectory)
        }
        #expect(proxy.url == "https://127.0.0.1:\(proxy.port)")
        let rest = CoderRESTClient(
            baseURL: "https://coder.example.test", token: "the-token", proxies: ProxyEnvironment(environment: ["HTTPS_PROXY": proxy.url]),
            tlsConfiguration: both)
        if namesTheProxy {
            let answer = try await rest.send(.GET, "/api/v2/x")
            #expect(answer.status == 200)
            #expect(await proxy.nextTarget() == "coder.example.test:443")
            #expect(server.text.hasPrefix("GET /api/v2/x HTTP/1.1\r\nHost: coder.example.test\r\n"), "\(server.text)")
        } else {
            await #expect {
                _ = try await rest.send(.GET, "/api/v2/x")
            } throws: { error in
                "\(error)".contains("proxy https://127.0.0.1:\(proxy.port): the certificate is not valid for 127.0.0.1")
            }
            #expect(server.text.isEmpty, "nothing reached the target")
        }
        await server.stop()
    }

    /// An `http://` access URL through an `https://` proxy: the request itself goes to the
    /// proxy over TLS, its target the absolute URL, as Go's transport forwards it.
    @Test func plainHTTPIsForwardedToAnHTTPSProxyOverTLS() async throws {
        try await TLSTestServer.withPlainServerBehindHTTPSProxy(answer: Array(Self.ok.utf8)) { server, proxy, both in
            let rest = CoderRESTClient(
                baseURL: "http://coder.example.test", token: "the-token", proxies: ProxyEnvironment(environment: ["HTTP_PROXY": proxy.url]),
                tlsConfiguration: both)
            let answer = try await rest.send(.GET, "/api/v2/x")
            #expect(answer.status == 200)
            #expect(await proxy.nextTarget() == "http://coder.example.test/api/v2/x")
            #expect(server.text.hasPrefix("GET http://coder.example.test/api/v2/x HTTP/1.1\r\nHost: coder.example.test\r\n"), "\(server.text)")
        }
    }

    /// The certificate names the proxy's address and another host: refused, with nothing,
    /// the token least of all, written to the server.
    @Test(arguments: [false, true], [StandInProxy.Kind.http, .socks5])
    func aCertificateForTheProxysAddressIsRefusedBeforeTheTokenLeaves(streamed: Bool, via kind: StandInProxy.Kind) async throws {
        try await Self.withServer(names: "IP:127.0.0.1,DNS:other.example.test", answer: Array(Self.ok.utf8), via: kind) { server, rest, _ in
            do {
                if streamed {
                    _ = try await rest.stream("/api/v2/workspaceagents/me/reinit") { status, _ in status }
                } else {
                    _ = try await rest.send(.GET, "/api/v2/workspaceagents/me/gitsshkey")
                }
                Issue.record("the request succeeded")
            } catch {
                #expect("\(error)".contains("not valid for coder.example.test"), "\(error)")
                #expect("\(error)".hasPrefix("GET https://coder.example.test/api/v2/workspaceagents/me/"), "\(error)")
            }
            #expect(server.text.isEmpty, "nothing is written before the check")
        }
    }

    /// Directly, the certificate must name the access URL's host: one that names only the
    /// address the name resolved to (127.0.0.1 for `localhost`) is refused before the token
    /// leaves, as Go refuses it.
    @Test(arguments: [("DNS:localhost", true), ("IP:127.0.0.1", false)])
    func directlyTheCertificateMustNameTheHost(names: String, valid: Bool) async throws {
        let (server, trusting, directory) = try await TLSTestServer.startTrusted(names: names, answer: Array(Self.ok.utf8))
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let rest = CoderRESTClient(
            baseURL: "https://localhost:\(server.port)", token: "the-token", proxies: .none, tlsConfiguration: trusting)
        do {
            let answer = try await rest.send(.GET, "/api/v2/buildinfo")
            #expect(valid, "a certificate for the connected address alone passed")
            #expect(answer.status == 200)
            #expect(server.text.hasPrefix("GET /api/v2/buildinfo HTTP/1.1\r\nHost: localhost:\(server.port)\r\n"), "\(server.text)")
        } catch {
            #expect(!valid, "\(error)")
            #expect("\(error)".contains("not valid for localhost"), "\(error)")
            #expect(server.text.isEmpty)
        }
        await server.stop()
    }

    /// An access URL named by an address: the certificate must name that address (before,
    /// such a URL was refused through a proxy, since the address checked was the proxy's).
    @Test(arguments: [("IP:10.1.2.3", true), ("IP:127.0.0.1", false)], [StandInProxy.Kind.http, .socks5])
    func anAddressIsCheckedAgainstTheTargetsAddress(names: (String, Bool), via kind: StandInProxy.Kind) async throws {
        let (names, valid) = names
        try await Self.withServer(names: names, answer: Array(Self.ok.utf8), base: "https://10.1.2.3:8443", via: kind) { server, rest, proxy in
            do {
                let answer = try await rest.send(.GET, "/api/v2/buildinfo")
                #expect(await proxy.nextTarget() == "10.1.2.3:8443")
                #expect(valid, "a certificate for the proxy's address passed")
                #expect(answer.status == 200)
                #expect(server.text.hasPrefix("GET /api/v2/buildinfo HTTP/1.1\r\nHost: 10.1.2.3:8443\r\n"), "\(server.text)")
            } catch {
                #expect(!valid, "\(error)")
                #expect("\(error)".contains("not valid for 10.1.2.3"), "\(error)")
                #expect(server.text.isEmpty)
            }
        }
    }

    /// Hostile answers: each a clear error, never a short or partial body.
    @Test(arguments: [
        ("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789", "unexpected EOF"),
        ("garbage\r\n\r\n", "GET https://coder.example.test/api/v2/x: invalid constant string"),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "GET https://coder.example.test/api/v2/x: invalid character in chunk size header"),
        ("", "unexpected EOF"),
    ])
    func aBrokenAnswerIsAnError(answer: String, reason: String) async throws {
        try await Self.withServer(names: "DNS:coder.example.test", answer: Array(answer.utf8), close: true) { _, rest, _ in
            do {
                let answer = try await rest.send(.GET, "/api/v2/x")
                Issue.record("an answer: \(answer.status) \(answer.body.count) bytes")
            } catch {
                #expect("\(error)".contains(reason), "\(error)")
            }
        }
    }

    /// A proxy that refuses the tunnel: its answer is the request's error.
    @Test func aProxysRefusalIsTheError() async throws {
        let proxy = try await TinyProxy.start(credentials: ("agent", "secret"))
        defer { proxy.stop() }
        let rest = CoderRESTClient(
            baseURL: "https://coder.example.test", token: "the-token", proxies: ProxyEnvironment(environment: ["HTTPS_PROXY": proxy.url()]))
        do {
            _ = try await rest.send(.GET, "/api/v2/x")
            Issue.record("a request through a proxy that wants credentials")
        } catch {
            #expect("\(error)".contains("refused CONNECT coder.example.test:443: 407"), "\(error)")
        }
        #expect(proxy.requests() == ["CONNECT coder.example.test:443 HTTP/1.1"])
    }

    /// The stream's deadline bounds its head only: a stream open past it goes on. A busy host
    /// may not bring the head within a short deadline, so it doubles until the stream opens.
    @Test func aStreamOutlivesItsConnectTimeout() async throws {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\nevent: ping\n\n"
        try await Self.withServer(names: "DNS:coder.example.test", answer: Array(head.utf8)) { _, rest, _ in
            var connectTimeout = Duration.milliseconds(300)
            for _ in 0..<6 {
                let outcome = Mutex<String?>(nil)
                let timeout = connectTimeout
                let reading = Task {
                    do {
                        try await rest.stream("/api/v2/workspaceagents/me/reinit", connectTimeout: timeout) { _, body in
                            for try await _ in body { outcome.withLock { $0 = $0 ?? "open" } }
                            outcome.withLock { $0 = "ended" }
                        }
                    } catch {
                        outcome.withLock { $0 = "\(error)" }
                        throw error
                    }
                }
                #expect(await eventually(timeout: .seconds(60)) { outcome.withLock { $0 } != nil })
                guard outcome.withLock({ $0 }) == "open" else {
                    // The head came too late (or not at all): try with a longer deadline.
                    reading.cancel()
                    _ = try? await reading.value
                    connectTimeout *= 2
                    continue
                }
                // Past the deadline the stream is still open (a deadline on it would have ended it).
                try await Task.sleep(for: timeout + .milliseconds(700))
                #expect(outcome.withLock { $0 } == "open")
                reading.cancel()
                await #expect(throws: CancellationError.self) { try await reading.value }
                return
            }
            Issue.record("the stream never opened within \(connectTimeout)")
        }
    }

    @Test func anAnswerLargerThanTheBoundIsRefused() async throws {
        let size = CoderRESTClient.maxResponseBytes + 1
        let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: \(size)\r\n\r\n".utf8) + [UInt8](repeating: 0x61, count: size)
        try await Self.withServer(names: "DNS:coder.example.test", answer: answer) { _, rest, _ in
            await #expect(throws: CoderRESTError.self) {
                do {
                    _ = try await rest.send(.GET, "/api/v2/x")
                } catch {
                    #expect("\(error)".contains("larger than 1024 KiB"), "\(error)")
                    throw error
                }
            }
        }
    }

    /// The deadline bounds the whole exchange, the proxy, the handshake and the answer: a
    /// server that says nothing, or whose answer (framed by the connection's end) stops part
    /// way, meets it as an error, never as the part that came.
    @Test(arguments: [nil, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"partial\":"])
    func aSilentOrCutAnswerMeetsTheDeadline(answer: String?) async throws {
        try await Self.withServer(names: "DNS:coder.example.test", answer: answer.map { Array($0.utf8) }) { _, rest, _ in
            do {
                let answer = try await rest.send(.GET, "/api/v2/x", timeout: .seconds(1))
                Issue.record("an answer: \(answer.status) \(answer.body.count) bytes")
            } catch {
                #expect("\(error)".hasSuffix("context deadline exceeded"), "\(error)")
            }
        }
    }

    /// A stream is read as it arrives, and cancelling its task ends it at once (the agent's
    /// shutdown), whatever the server does.
    @Test func aStreamIsReadAsItArrivesAndEndsWithItsTask() async throws {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\nevent: ping\n\n"
        try await Self.withServer(names: "DNS:coder.example.test", answer: Array(head.utf8)) { server, rest, _ in
            let first = Mutex<String?>(nil)
            let reading = Task {
                try await rest.stream("/api/v2/workspaceagents/me/reinit", query: [("wait", "true")]) { status, body in
                    #expect(status == 200)
                    for try await chunk in body {
                        first.withLock { $0 = $0 ?? String(decoding: chunk.readableBytesView, as: UTF8.self) }
                    }
                }
            }
            #expect(await eventually(timeout: .seconds(60)) { first.withLock { $0 } != nil })
            #expect(first.withLock { $0 } == "event: ping\n\n")
            #expect(server.text.contains("\r\nAccept: text/event-stream\r\n"), "\(server.text)")
            reading.cancel()
            await #expect(throws: CancellationError.self) { try await reading.value }
        }
    }

    /// The reinit loop through the tunnel: an event on the stream reaches the agent.
    @Test func theReinitLoopHearsAnEventThroughTheTunnel() async throws {
        let stream =
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
            + "event: data\ndata: {\"workspace_id\":\"aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee\",\"reason\":\"prebuild_claimed\"}\n\n"
        try await Self.withServer(names: "DNS:coder.example.test", answer: Array(stream.utf8)) { _, rest, _ in
            let events = Mutex<[ReinitEvent]>([])
            let watcher = ReinitWatcher(
                rest: rest, tokens: FixedSessionToken("the-token"), logger: Logger(label: "reinit") { _ in SwiftLogNoOpLogHandler() }
            ) { event in
                events.withLock { $0.append(event) }
                return false
            }
            try await watcher.run()
            #expect(events.withLock { $0.map(\.workspaceID) } == ["aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"])
        }
    }
}
