import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Synchronization
import Testing

/// The agent's token leaves its environment block once read (`/proc/<agent>/environ` is
/// readable by every process of the workspace user), and the agent still uses it.
@Suite(.timeLimit(.minutes(2)))
struct AgentTokenEnvironTests {
    /// The agent's environment block as `/proc` shows it.
    static func environBlock(_ pid: pid_t) throws -> String {
        let data = try #require(FileManager.default.contents(atPath: "/proc/\(pid)/environ"))
        return String(decoding: data, as: UTF8.self)
    }

    @Test func tokenIsScrubbedFromTheEnvironmentBlockAndStillAuthenticates() async throws {
        let double = ControlPlaneDouble()
        try await double.run { url in
            let agent = try AgentDaemon.launch(
                ["--http-address", "127.0.0.1:0", "--agent-url", url],
                environment: ["CODER_AGENT_TOKEN": double.token, "AGENT_ENVIRON_MARKER": "still-here"])
            defer { agent.cleanup() }
            _ = try await agent.port()
            let block = try Self.environBlock(agent.pid)
            #expect(block.contains("AGENT_ENVIRON_MARKER=still-here"), "the block was not read")
            #expect(!block.contains(double.token), "the token is still in /proc/<agent>/environ")
            // The token still serves the agent: it connects and reports its lifecycle.
            #expect(await eventually(timeout: .seconds(30)) { double.recorded.withLock { $0.lifecycle.count } == 2 }, "\(agent.log)")
            agent.signal(SIGTERM)
            #expect(await agent.exitStatus() == 0, "\(agent.log)")
        }
    }
}
