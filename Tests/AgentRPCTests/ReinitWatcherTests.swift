import AgentCore
import AgentRPC
import AgentTestSupport
import ControlPlaneDouble
import Logging
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
}
