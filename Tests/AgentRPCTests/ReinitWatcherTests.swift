import AgentCore
import AgentRPC
import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Logging
import OutboundProxy
import Synchronization
import Testing

/// The `/reinit` loop against the double: events handed over in order, a silent stream
/// given up and opened again, 409 the end.
@Suite(.timeLimit(.minutes(2)))
struct ReinitWatcherTests {
    static let quiet = Logger(label: "reinit") { _ in SwiftLogNoOpLogHandler() }
    static let workspace = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"

    @Test func aSilentStreamIsOpenedAgainAndA409EndsTheLoop() async throws {
        let double = ControlPlaneDouble()
        let reinit = double.serveReinit()
        let events = Mutex<[ReinitEvent]>([])
        try await double.run { url in
            let watcher = ReinitWatcher(
                rest: CoderRESTClient(baseURL: url, token: nil), tokens: FixedSessionToken(double.token), logger: Self.quiet,
                idleTimeout: .milliseconds(400)
            ) { event in
                events.withLock { $0.append(event) }
                return true
            }
            let loop = Task { try await watcher.run() }
            // Only the opening ping: after the idle timeout the stream is opened again.
            #expect(await eventually(timeout: .seconds(30)) { reinit.requests >= 2 })
            // Replayed to each new stream as coderd does: on a loaded host the stream the claim
            // first meets may be the one the 400 ms idle timeout is closing.
            reinit.claim(workspaceID: Self.workspace, ownerID: nil, replayed: true)
            #expect(await eventually(timeout: .seconds(30)) { !events.withLock { $0.isEmpty } })
            #expect(events.withLock { $0.first } == ReinitEvent(workspaceID: Self.workspace, reason: "prebuild_claimed", ownerID: nil))
            reinit.refuse()
            // The loop returns by itself on the 409.
            try await loop.value
            let requests = reinit.requests
            #expect(requests >= 3)
        }
    }

    /// An error answer whose body stalls is given up after the idle timeout like a silent
    /// stream, and the request is made again. Before, the request's deadline ended at the
    /// head and nothing bounded the body: one such answer stopped the polling for good.
    @Test func anErrorAnswerWhoseBodyStallsIsGivenUp() async throws {
        let server = try await TLSTestServer.startPlain(
            answer: Array("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 100\r\n\r\nerr".utf8))
        let watcher = ReinitWatcher(
            rest: CoderRESTClient(baseURL: "http://127.0.0.1:\(server.port)", token: nil, proxies: ProxyEnvironment(environment: [:])),
            tokens: FixedSessionToken("t"), logger: Self.quiet, idleTimeout: .milliseconds(400)
        ) { _ in true }
        let loop = Task { try await watcher.run() }
        #expect(await eventually(timeout: .seconds(30)) { server.text.components(separatedBy: "GET \(ReinitWatcher.path)").count > 2 }, "\(server.text)")
        loop.cancel()
        await server.stop()
    }

    /// A client's and a watcher's descriptions (ServiceLifecycle logs each service it starts)
    /// carry neither the token nor the headers' values.
    @Test func descriptionsCarryNoSecrets() {
        let client = CoderRESTClient(baseURL: "https://c.example", token: "TOKEN-1", headers: [("X-Secret", "HEADER-2")])
        let watcher = ReinitWatcher(rest: client, tokens: FixedSessionToken("TOKEN-3"), logger: Self.quiet) { _ in true }
        for text in [String(describing: client), String(reflecting: client), String(describing: watcher), String(reflecting: watcher), "\(FixedSessionToken("TOKEN-3"))"] {
            #expect(!text.contains("TOKEN") && !text.contains("HEADER-2"), "\(text)")
        }
        #expect(String(describing: client).contains("X-Secret"))
    }
}
