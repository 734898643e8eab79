import AgentTLS
import AgentCore
import AgentProto
import AgentRPC
import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Synchronization
import SwiftProtobuf
import OutboundProxy
import Testing
@testable import Scripts

/// App health: the tracker's exact rules, one check against a
/// real loopback server, and the reporter end to end against the control-plane double.
@Suite(.timeLimit(.minutes(5)))
struct AppHealthTests {
    typealias Kit = ReporterTestKit

    // MARK: Tracker

    static func app(
        _ byte: UInt8, health: ManifestApp.Health = .initializing, threshold: Int32 = 1,
        url: String = "http://127.0.0.1:1/", interval: Duration = .seconds(1)
    ) -> ManifestApp {
        ManifestApp(
            id: Kit.uuid(byte), slug: "app\(byte)", healthcheckURL: url, healthcheckInterval: interval,
            healthcheckThreshold: threshold, health: health)
    }

    @Test func thresholdOneTurnsUnhealthyOnTheSecondFailure() {
        var tracker = AppHealthTracker(apps: [Self.app(1)])
        #expect(tracker.record(Kit.uuid(1), healthy: false) == .initializing, "the first failure only counts")
        #expect(tracker.record(Kit.uuid(1), healthy: false) == .unhealthy)
        #expect(tracker.record(Kit.uuid(1), healthy: false) == .unhealthy)
        #expect(tracker.record(Kit.uuid(1), healthy: true) == .healthy)
    }

    @Test func thresholdThreeKeepsTheStateForThreeFailuresAndRecovers() {
        var tracker = AppHealthTracker(apps: [Self.app(1, threshold: 3)])
        #expect(tracker.record(Kit.uuid(1), healthy: true) == .healthy)
        for failure in 1...3 {
            #expect(tracker.record(Kit.uuid(1), healthy: false) == .healthy, "failure \(failure) is only counted")
        }
        #expect(tracker.entries[0].failures == 3)
        #expect(tracker.record(Kit.uuid(1), healthy: false) == .unhealthy, "the 4th consecutive failure")
        #expect(tracker.record(Kit.uuid(1), healthy: true) == .healthy)
        #expect(tracker.entries[0].failures == 0, "a success resets the counter")
        // Counting starts over: three more failures keep HEALTHY.
        for _ in 1...3 { tracker.record(Kit.uuid(1), healthy: false) }
        #expect(tracker.health(of: Kit.uuid(1)) == .healthy)
        // A success in between resets the run of failures.
        tracker.record(Kit.uuid(1), healthy: true)
        for _ in 1...3 { tracker.record(Kit.uuid(1), healthy: false) }
        #expect(tracker.health(of: Kit.uuid(1)) == .healthy)
    }

    @Test func trackedAndCheckedApps() {
        let apps = [
            Self.app(1),
            Self.app(2, health: .disabled),
            Self.app(3, url: ""),
            Self.app(4, interval: .zero),
            Self.app(5, threshold: 0),
            Self.app(6, health: .unhealthy),
        ]
        let tracker = AppHealthTracker(apps: apps)
        #expect(tracker.entries.map(\.id) == [1, 3, 4, 5, 6].map { Kit.uuid($0) }, "all but the DISABLED one")
        #expect(tracker.health(of: Kit.uuid(6)) == .unhealthy, "starts from the manifest's value")
        #expect(AppHealthTracker.checkedApps(apps).map(\.id) == [Kit.uuid(1), Kit.uuid(6)])
        #expect(AppHealthTracker(apps: [Self.app(2, health: .disabled)]).isEmpty)
        var untracked = tracker
        #expect(untracked.record(Kit.uuid(2), healthy: true) == nil)
        #expect(untracked == tracker, "an untracked app changes nothing")
    }

    @Test func changesCarryEveryTrackedAppOnlyWhenSomethingChanged() throws {
        var tracker = AppHealthTracker(apps: [Self.app(1), Self.app(2), Self.app(3, health: .disabled)])
        let atStart = tracker.takeChanges()
        #expect(atStart == nil, "the manifest's states are not a change")
        tracker.record(Kit.uuid(1), healthy: false)
        let afterCountedFailure = tracker.takeChanges()
        #expect(afterCountedFailure == nil, "a counted failure is not a change")
        tracker.record(Kit.uuid(1), healthy: true)
        let taken = tracker.takeChanges()
        let changes = try #require(taken)
        #expect(changes.map(\.id) == [Kit.uuid(1), Kit.uuid(2)])
        #expect(changes.map(\.health) == [.healthy, .initializing])
        let again = tracker.takeChanges()
        #expect(again == nil, "taken once: not retried")
        tracker.record(Kit.uuid(1), healthy: true)
        let unchanged = tracker.takeChanges()
        #expect(unchanged == nil, "HEALTHY again is no change")
    }

    // MARK: Probe

    @Test func probeAgainstARealServer() async throws {
        let server = try await Kit.HTTPServer.start()
        server.set("/ok", .status(200))
        server.set("/missing", .status(404))
        server.set("/broken", .status(500))
        server.set("/unavailable", .status(503))
        server.set("/moved", .redirect("/ok"))
        server.set("/moved-to-broken", .redirect("/broken"))
        server.set("/loop", .redirect("/loop"))
        let probe = AppHealthProbe()
        let timeout = Duration.seconds(20)
        #expect(await probe.check(server.url("/ok"), timeout: timeout) == .healthy(status: 200))
        #expect(await probe.check(server.url("/missing"), timeout: timeout) == .healthy(status: 404), "below 500 is healthy")
        #expect(await probe.check(server.url("/broken"), timeout: timeout) == .failed("status 500"))
        #expect(await probe.check(server.url("/unavailable"), timeout: timeout) == .failed("status 503"))
        #expect(await probe.check(server.url("/moved"), timeout: timeout) == .healthy(status: 200), "redirects are followed")
        #expect(await probe.check(server.url("/moved-to-broken"), timeout: timeout) == .failed("status 500"))
        let before = server.hits.count
        // 60 s: ten round trips, each a new connection, on a host whose cores are taken.
        #expect(await probe.check(server.url("/loop"), timeout: .seconds(60)) == .failed("stopped after 10 redirects"))
        #expect(server.hits.count - before == 10, "Go's limit: 10 requests in all")
        #expect(!(await probe.check("ftp://127.0.0.1/", timeout: timeout)).isHealthy)
        #expect(!(await probe.check("not a url", timeout: timeout)).isHealthy)
        // Go refuses a port past 65535 (getaddrinfo would have wrapped 70000 to 4464).
        #expect(await probe.check("http://127.0.0.1:70000/", timeout: timeout) == .failed("unsupported URL \"http://127.0.0.1:70000/\""))
        // A 101 is a final answer (Go's checker calls the app healthy); it had waited for
        // another head until the timeout.
        server.set("/switching", .status(101))
        #expect(await probe.check(server.url("/switching"), timeout: timeout) == .healthy(status: 101))
        // A name is looked up on the probe's own threads.
        #expect(await probe.check(server.url("/ok", host: "localhost"), timeout: timeout) == .healthy(status: 200))
        await server.stop()
    }

    /// Behind a proxy (Debian's tinyproxy, with credentials) an http check is the proxy's own
    /// request for the whole URL, as Go's client sends it; `NO_PROXY` and loopback go direct.
    /// The server is addressed as `0.0.0.0`: 127.0.0.1 is never proxied.
    @Test func checksGoThroughTheProxyTheURLPicks() async throws {
        let proxy = try await TinyProxy.start(credentials: ("agent", "pw"))
        defer { proxy.stop() }
        let server = try await Kit.HTTPServer.start()
        server.set("/ok", .status(200))
        let proxied = AppHealthProbe(proxies: ProxyEnvironment(environment: ["HTTP_PROXY": proxy.url(user: "agent", password: "pw")]))
        #expect(await proxied.check(server.url("/ok", host: "0.0.0.0"), timeout: .seconds(30)) == .healthy(status: 200))
        #expect(proxy.requests() == ["GET http://0.0.0.0:\(server.port)/ok HTTP/1.1"])
        #expect(await proxied.check(server.url("/ok"), timeout: .seconds(30)) == .healthy(status: 200))
        let exempt = AppHealthProbe(proxies: ProxyEnvironment(environment: ["HTTP_PROXY": proxy.url(), "NO_PROXY": "0.0.0.0"]))
        #expect(await exempt.check(server.url("/ok", host: "0.0.0.0"), timeout: .seconds(30)) == .healthy(status: 200))
        #expect(proxy.requests().count == 1)
        // Without the credentials the proxy's 407 is the answer: below 500, healthy, as in Go.
        let anonymous = AppHealthProbe(proxies: ProxyEnvironment(environment: ["HTTP_PROXY": proxy.url()]))
        #expect(await anonymous.check(server.url("/ok", host: "0.0.0.0"), timeout: .seconds(30)) == .healthy(status: 407))
        await server.stop()
    }

    /// An https test server with a throwaway certificate for `names` (openssl's subject
    /// alternative names), a client configuration that trusts it, and the certificate's
    /// directory, which the caller removes.
    static func tlsServer(
        names: String = "DNS:localhost,IP:127.0.0.1,IP:::1"
    ) async throws -> (server: Kit.HTTPServer, trusting: TLSConfiguration, directory: String) {
        let (certificate, key, directory) = try await Kit.selfSignedCertificate(names: names)
        let serverConfiguration = TLSConfiguration.makeServerConfiguration(certificateChainFile: certificate, privateKeyFile: key)
        let server = try await Kit.HTTPServer.start(tls: try TLSContext(configuration: serverConfiguration))
        var trusting = TLSConfiguration.makeClientConfiguration()
        trusting.trustRoots = .file(certificate)
        return (server, trusting, directory)
    }

    /// https: healthy through a server whose certificate the probe trusts (by name and by IP
    /// address); a failure with the system's trust store, which does not know it.
    @Test func httpsVerifiesTheCertificate() async throws {
        let (server, trusting, directory) = try await Self.tlsServer()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        server.set("/missing", .status(404))
        let probe = AppHealthProbe(tlsConfiguration: trusting)
        // Bounds, not measures: a TLS handshake in a debug build on a loaded host may take seconds.
        let ok = await probe.check(server.url("/ok", scheme: "https", host: "localhost"), timeout: .seconds(60))
        #expect(ok == .healthy(status: 200), "\(ok)")
        let missing = await probe.check(server.url("/missing", scheme: "https"), timeout: .seconds(60))
        #expect(missing == .healthy(status: 404), "\(missing)")
        let untrusted = await AppHealthProbe().check(server.url("/ok", scheme: "https", host: "localhost"), timeout: .seconds(20))
        #expect("\(untrusted)".contains("certificate verify failed"), "\(untrusted)")
        // Plain http to the TLS port is no answer either.
        #expect(!(await probe.check(server.url("/ok"), timeout: .seconds(5))).isHealthy)
        await server.stop()
    }

    /// A check of `/ok` whose certificate names `target` (`valid`): healthy, the request sent;
    /// or not: refused for `target`, nothing sent.
    static func expectChecked(_ outcome: AppHealthProbe.Outcome, server: Kit.HTTPServer, valid: Bool, target: String) {
        if valid {
            #expect(outcome == .healthy(status: 200), "\(outcome)")
            #expect(server.hits == ["/ok"])
        } else {
            #expect("\(outcome)".contains("not valid for \(target)"), "\(outcome)")
            #expect(server.hits.isEmpty, "nothing is sent before the check")
        }
    }

    /// https to an IP address through the proxy's tunnel: the certificate must name the
    /// target's address. A check by the connected address, the proxy's, would pass a server
    /// whose certificate names only 127.0.0.1 (where the proxy is) for 0.0.0.0.
    @Test func httpsToAnAddressThroughTheProxyChecksTheTargetsAddress() async throws {
        let proxy = try await TinyProxy.start()
        defer { proxy.stop() }
        for (names, valid) in [("IP:0.0.0.0", true), ("IP:127.0.0.1", false)] {
            let (server, trusting, directory) = try await Self.tlsServer(names: names)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let probe = AppHealthProbe(tlsConfiguration: trusting, proxies: ProxyEnvironment(environment: ["HTTPS_PROXY": proxy.url()]))
            let outcome = await probe.check(server.url("/ok", scheme: "https", host: "0.0.0.0"), timeout: .seconds(60))
            Self.expectChecked(outcome, server: server, valid: valid, target: "0.0.0.0")
            await server.stop()
        }
        #expect(proxy.requests().allSatisfy { $0.hasPrefix("CONNECT 0.0.0.0:") } && proxy.requests().count == 2, "\(proxy.requests())")
    }

    /// https to a name through a proxy that stands in for every target: a certificate that
    /// names only the proxy's address (127.0.0.1, which a check by the connected address
    /// accepts) is refused, one that names the target passes.
    /// Through an HTTP proxy's tunnel or a SOCKS5 proxy alike.
    @Test(arguments: [StandInProxy.Kind.http, .socks5, .socks5Credentials])
    func httpsThroughAProxyNeedsTheTargetsNameNotTheProxysAddress(via kind: StandInProxy.Kind) async throws {
        for (names, valid) in [("DNS:coder.example.test", true), ("IP:127.0.0.1,DNS:other.example.test", false)] {
            let (server, trusting, directory) = try await Self.tlsServer(names: names)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            guard let proxy = await StandInProxy.start(relayingTo: server.port, as: kind) else {
                await server.stop()
                Issue.record("the stand-in proxy did not start")
                return
            }
            defer { proxy.stop() }
            let probe = AppHealthProbe(tlsConfiguration: trusting, proxies: ProxyEnvironment(environment: ["HTTPS_PROXY": proxy.url]))
            let outcome = await probe.check("https://coder.example.test:443/ok", timeout: .seconds(60))
            Self.expectChecked(outcome, server: server, valid: valid, target: "coder.example.test")
            #expect(await proxy.nextTarget() == "coder.example.test:443")
            await server.stop()
        }
    }

    /// Through an `https://` proxy: TLS to the proxy first, its certificate checked against
    /// the proxy's address; then an https check's own TLS inside the tunnel, checked against
    /// the target's name, or a plain http check forwarded to the proxy over that TLS.
    @Test func checksGoThroughAnHTTPSProxy() async throws {
        let (target, trusting, directory) = try await Self.tlsServer(names: "DNS:coder.example.test")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let plain = try await Kit.HTTPServer.start()
        let files = try await Kit.selfSignedCertificate(names: "IP:127.0.0.1")
        defer { try? FileManager.default.removeItem(atPath: files.directory) }
        var both = trusting
        both.trustRoots = .pem(Array(try #require(FileManager.default.contents(atPath: directory + "/cert.pem"))) + Array(try #require(FileManager.default.contents(atPath: files.certificate))))
        guard let tunnel = await StandInProxy.start(relayingTo: target.port, tls: (files.certificate, files.key)),
            let forward = await StandInProxy.start(relayingTo: plain.port, tls: (files.certificate, files.key))
        else {
            Issue.record("the stand-in proxies did not start")
            return
        }
        defer {
            tunnel.stop()
            forward.stop()
        }

        let secure = AppHealthProbe(tlsConfiguration: both, proxies: ProxyEnvironment(environment: ["HTTPS_PROXY": tunnel.url]))
        #expect(tunnel.url.hasPrefix("https://"))
        #expect(await secure.check("https://coder.example.test/ok", timeout: .seconds(60)) == .healthy(status: 200))
        #expect(await tunnel.nextTarget() == "coder.example.test:443")
        #expect(target.hits == ["/ok"])

        let forwarded = AppHealthProbe(tlsConfiguration: both, proxies: ProxyEnvironment(environment: ["HTTP_PROXY": forward.url]))
        #expect(await forwarded.check("http://coder.example.test/ok", timeout: .seconds(60)) == .healthy(status: 200))
        #expect(await forward.nextTarget() == "http://coder.example.test/ok")
        #expect(plain.hits == ["http://coder.example.test/ok"], "the absolute URL, as a proxy is asked")

        // Without the proxy's certificate trusted, neither check reaches a server.
        let untrusting = AppHealthProbe(tlsConfiguration: trusting, proxies: ProxyEnvironment(environment: ["HTTP_PROXY": forward.url]))
        let refused = await untrusting.check("http://coder.example.test/ok", timeout: .seconds(60))
        #expect(!refused.isHealthy && "\(refused)".contains("proxy"), "\(refused)")
        #expect(plain.hits.count == 1)
        await target.stop()
        await plain.stop()
    }

    /// https to a name, directly: a certificate that names only the address the name
    /// resolved to (127.0.0.1 for `localhost`, which a check by the connected address accepts)
    /// is refused, as Go refuses it; one that names the host passes.
    @Test func httpsDirectlyNeedsTheHostsNameNotTheConnectedAddress() async throws {
        for (names, valid) in [("DNS:localhost", true), ("IP:127.0.0.1", false)] {
            let (server, trusting, directory) = try await Self.tlsServer(names: names)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let probe = AppHealthProbe(tlsConfiguration: trusting, proxies: .none)
            let outcome = await probe.check(server.url("/ok", scheme: "https", host: "localhost"), timeout: .seconds(60))
            Self.expectChecked(outcome, server: server, valid: valid, target: "localhost")
            await server.stop()
        }
    }

    @Test func refusedAndSilentServersFail() async throws {
        let probe = AppHealthProbe()
        let refused = await probe.check("http://127.0.0.1:\(freeLoopbackPort())/", timeout: .seconds(20))
        #expect(!refused.isHealthy, "\(refused)")

        let server = try await Kit.HTTPServer.start()
        server.set("/silent", .silent)
        // 5 s: on a loaded host a 1 s timeout could pass before the request was even sent.
        // The check gives up at its own timeout ("timed out"), not at a transport default
        // (another text); the suite's limit catches a wait that never ends.
        let silent = await probe.check(server.url("/silent"), timeout: .seconds(5))
        #expect(silent == .failed("timed out"))
        #expect(await eventually { server.hits == ["/silent"] }, "the request did arrive")
        await server.stop()
    }

    @Test func cancellingAProbeEndsIt() async throws {
        let server = try await Kit.HTTPServer.start()
        server.set("/silent", .silent)
        let check = Task { await AppHealthProbe().check(server.url("/silent"), timeout: .seconds(600)) }
        #expect(await eventually(timeout: Kit.patience) { server.hits.count == 1 })
        check.cancel()
        let outcome = await check.value
        #expect(!outcome.isHealthy)
        await server.stop()
    }

    // MARK: Reporter, end to end

    /// INITIALIZING → HEALTHY (404 counts as healthy) → UNHEALTHY only after threshold + 1
    /// failures → HEALTHY, reported only on change, every tracked app in every batch; an app
    /// whose server never answers turns UNHEALTHY (each check gives up within its interval).
    @Test func reporterUpAndDownAgainstTheDouble() async throws {
        let server = try await Kit.HTTPServer.start()
        server.set("/a", .status(404))
        server.set("/b", .status(200))
        server.set("/c", .silent)
        var manifest = ControlPlaneDouble.defaultManifest
        func app(_ byte: UInt8, path: String, health: Coder_Agent_V2_WorkspaceApp.Health) -> Coder_Agent_V2_WorkspaceApp {
            var app = Coder_Agent_V2_WorkspaceApp()
            app.id = Data(Kit.uuid(byte))
            app.slug = "app\(byte)"
            app.health = health
            if !path.isEmpty {
                app.healthcheck.url = server.url(path)
                app.healthcheck.interval = .init(seconds: 1)
                app.healthcheck.threshold = 1
            }
            return app
        }
        manifest.apps = [
            app(1, path: "/a", health: .initializing),
            app(2, path: "/b", health: .initializing),
            app(3, path: "/c", health: .initializing),
            app(4, path: "", health: .disabled),
        ]
        let double = ControlPlaneDouble(manifest: manifest)
        let apps = ControlPlaneSession.agentManifest(from: manifest).apps
        #expect(apps.count == 4)
        let reporter = AppHealthReporter(apps: apps, logger: Kit.quiet)
        let participant = Kit.Participant(name: "app health") { try await reporter.run(on: $0) }
        @Sendable func batches() -> [[[UInt8]: Coder_Agent_V2_AppHealth]] {
            double.recorded.withLock { $0.appHealthBatches }.map { batch in
                Dictionary(uniqueKeysWithValues: batch.updates.map { (Array($0.id), $0.health) })
            }
        }
        @Sendable func latest(_ byte: UInt8) -> Coder_Agent_V2_AppHealth? { batches().last?[Kit.uuid(byte)] }

        try await double.run { url in
            let session = Kit.makeSession(url, token: double.token, participants: [participant])
            let running = Task { try await session.run() }
            #expect(
                await eventually(timeout: Kit.patience) {
                    latest(1) == .healthy && latest(2) == .healthy && latest(3) == .unhealthy
                }, "\(batches())")

            // Only on change: no batch repeats the one before it (a check that a loaded host
            // times out may change a state, which is then rightly reported; the exact
            // threshold count is the tracker's own test).
            try await Task.sleep(for: .seconds(3))
            let sent = batches()
            #expect(zip(sent, sent.dropFirst()).allSatisfy { $0 != $1 }, "only on change: \(sent)")

            server.set("/a", .status(500))
            #expect(await eventually(timeout: Kit.patience) { latest(1) == .unhealthy }, "\(batches())")
            #expect(await eventually(timeout: Kit.patience) { latest(2) == .healthy })

            server.set("/a", .status(200))
            #expect(await eventually(timeout: Kit.patience) { latest(1) == .healthy }, "\(batches())")

            session.beginShutdown()
            try await running.value
        }
        let all = batches()
        for batch in all {
            #expect(Set(batch.keys) == [Kit.uuid(1), Kit.uuid(2), Kit.uuid(3)], "every tracked app, never the DISABLED one")
        }
        for (previous, next) in zip(all, all.dropFirst()) {
            #expect(previous != next, "each batch reports a change: \(all)")
        }
        #expect(all.first?.values.contains { $0 != .initializing } == true, "the first batch reports a change too")
        #expect(all.map { $0[Kit.uuid(1)] }.contains(.unhealthy))
        await server.stop()
    }

    /// No tracked app: the reporter returns at once and never calls.
    @Test func nothingRunsWithoutTrackedApps() async throws {
        let double = ControlPlaneDouble()
        let returned = TestFlag()
        let reporter = AppHealthReporter(apps: [Self.app(1, health: .disabled)], logger: Kit.quiet)
        let participant = Kit.Participant(name: "app health") { session in
            try await reporter.run(on: session)
            returned.set()
        }
        try await double.run { url in
            let session = Kit.makeSession(url, token: double.token, participants: [participant])
            let running = Task { try await session.run() }
            #expect(await eventually(timeout: Kit.patience) { returned.isSet })
            session.beginShutdown()
            try await running.value
        }
        #expect(double.recorded.withLock { $0.appHealthBatches }.isEmpty)
    }
}
