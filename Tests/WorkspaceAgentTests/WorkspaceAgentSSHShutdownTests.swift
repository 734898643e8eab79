import AgentTestSupport
import Foundation
import Testing

/// The real agent on SIGTERM ends the SSH sessions it runs, those that ignore SIGHUP too
/// (`trap '' HUP`), with and without a terminal, as docs/limits.md promises for everything
/// it started (they used to outlive the agent).
@Suite(.serialized, .timeLimit(.minutes(3)))
struct WorkspaceAgentSSHShutdownTests {
    @Test func sshSessionsThatIgnoreSIGHUPDoNotOutliveTheAgent() async throws {
        let root = NSTemporaryDirectory() + "ssh-agent-stop-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let agent = try AgentDaemon.launch(
            ["--http-address", "127.0.0.1:0", "--state-dir", root + "/state", "--log-level", "info", "--ssh-address", "127.0.0.1:0"])
        defer { agent.cleanup() }
        let sshPort = await agent.sshPort(timeout: .seconds(60))
        try #require(!sshPort.isEmpty, "no ssh listener; log:\n\(agent.log)")
        var clients: [ChildProgram.Running] = []
        var pids: [pid_t] = []
        defer {
            // Whatever the outcome, nothing of this test outlives it.
            for pid in pids where kill(pid, 0) == 0 { kill(-pid, SIGKILL) }
            for client in clients { client.kill() }
        }
        for (index, options) in [[], ["-tt"]].enumerated() {
            let marker = "\(root)/pid-\(index)"
            let client = try #require(
                ChildProgram.start(
                    [
                        "ssh", "-F", "/dev/null", "-p", sshPort, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                        "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
                    ] + options
                        + ["127.0.0.1", "echo $$ > \(marker).tmp; mv \(marker).tmp \(marker); trap '' HUP; sleep 300; echo outlived"]))
            clients.append(client)
            #expect(await eventually(timeout: .seconds(60)) { access(marker, F_OK) == 0 }, "session \(index) never started")
            pids.append(try #require(Int32(try String(contentsOfFile: marker, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines))))
        }
        agent.signal(SIGTERM)
        #expect(await agent.exitStatus(timeout: .seconds(60)) == 0, "log:\n\(agent.log)")
        for pid in pids {
            #expect(await eventually(timeout: .seconds(30)) { kill(pid, 0) != 0 }, "session shell \(pid) outlived the agent")
        }
    }
}
