import AgentProto
import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Prebuild reinitialisation with the binary: `/reinit` held beside the agent, 409 ends it,
/// a claim by a new owner restarts the agent once, the same owner again is ignored.
@Suite(.timeLimit(.minutes(4)))
struct WorkspaceAgentReinitTests {
    static let workspace = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
    static let owner = "0b1c2d3e-4f50-4617-8283-94a5b6c7d8e9"

    /// 409 (not a prebuild waiting to be claimed) stops polling for good: no second request
    /// even after the connection is dropped and made again.
    @Test func aConflictEndsPolling() async throws {
        let double = ControlPlaneDouble()
        let reinit = double.serveReinit()
        reinit.refuse()
        let tokenFile = try ScriptsHarness.tokenFile(double)
        defer { unlink(tokenFile) }
        try await double.run { url in
            let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile])
            defer { agent.cleanup() }
            #expect(await eventually(timeout: .seconds(90)) { agent.log.contains("received terminal 409, stopping reinit polling") }, "\(agent.log)")
            #expect(await eventually(timeout: .seconds(90)) { double.recorded.withLock { $0.manifests } >= 1 }, "\(agent.log)")
            await double.dropConnections()
            #expect(await eventually(timeout: .seconds(90)) { double.recorded.withLock { $0.manifests } >= 2 }, "\(agent.log)")
            #expect(reinit.requests == 1)
            #expect(agent.reap() == nil)
        }
    }

    /// A claim for a new owner: the agent shuts down (OFF reported) and starts from scratch
    /// (a second manifest, its lifecycle again); the claim replayed to the new agent's
    /// `/reinit` names the same owner and is ignored: polling stops, no third start.
    @Test func aNewOwnerRestartsTheAgentOnce() async throws {
        let double = ControlPlaneDouble()
        let reinit = double.serveReinit()
        let tokenFile = try ScriptsHarness.tokenFile(double)
        defer { unlink(tokenFile) }
        try await double.run { url in
            let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile])
            defer { agent.cleanup() }
            #expect(await eventually(timeout: .seconds(90)) { double.recorded.withLock { $0.lifecycle.contains(.ready) } && reinit.openStreams == 1 }, "\(agent.log)")
            #expect(double.recorded.withLock { $0.manifests } == 1)
            // A ping is no event.
            reinit.ping()
            reinit.claim(workspaceID: Self.workspace, ownerID: Self.owner)
            // The first agent's end, then the second's start to READY.
            func restarted() -> Bool {
                let lifecycle = double.recorded.withLock { $0.lifecycle }
                guard let off = lifecycle.firstIndex(of: .off) else { return false }
                return lifecycle[off...].contains(.starting) && lifecycle[off...].contains(.ready)
            }
            #expect(
                await eventually(timeout: .seconds(90)) {
                    agent.log.contains("reinit event for the same owner ignored") && restarted()
                }, "\(agent.log)")
            let (manifests, lifecycle) = double.recorded.withLock { ($0.manifests, $0.lifecycle) }
            #expect(manifests == 2, "\(agent.log)")
            #expect(lifecycle.filter { $0 == .off }.count == 1, "\(lifecycle)")
            #expect(reinit.requests == 2)
            #expect(agent.reap() == nil, "\(agent.log)")
            // Still the same process (started again in place).
            #expect(kill(agent.pid, 0) == 0)
        }
    }
}
