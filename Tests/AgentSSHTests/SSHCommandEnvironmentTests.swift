import AgentCore
import AgentTestSupport
import Foundation
import Testing

@testable import AgentSSH

/// An SSH session's command gets every command's layers over the client's
/// variables, and counts under the app name its client gave (API 2.11's session counts).
@Suite(.serialized, .timeLimit(.minutes(3)))
struct SSHCommandEnvironmentTests {
    @Test func aSessionGetsTheTableInPrecedence() async throws {
        var manifest = AgentManifest(
            directory: "/",
            environment: ["CODER": "true", "CODER_WORKSPACE_NAME": "ws", "SHARED_MS": "manifest", "SHARED_MA": "manifest", "GIT_ASKPASS": "manifest"],
            workspaceName: "ws", agentName: "main", ownerName: "alice")
        manifest.vsCodePortProxyURI = "https://{{port}}--main--ws--alice.apps.example.com"
        manifest.commandSecrets = CommandSecrets(sessionToken: "tok-123", variables: ["SHARED_MS": "secret $HOME", "GIT_ASKPASS": "secret"])
        let server = try await SSHSessionTests.Server(
            manifest: manifest, environment: ["PATH": "/usr/bin:/bin", "SHARED_MA": "agent", "HOME": "/root"],
            command: CommandEnvironment(executable: "/opt/agent", binDirectory: "/data/coder-script-data/bin"))
        defer { Task { await server.stop() } }
        let names = [
            "CODER_WORKSPACE_NAME", "CODER_WORKSPACE_AGENT_NAME", "CODER_AGENT_TOKEN", "GIT_SSH_COMMAND", "VSCODE_PROXY_URI",
            "CS_DISABLE_GETTING_STARTED_OVERRIDE", "SHARED_MA", "SHARED_MS", "GIT_ASKPASS", "PATH",
        ]
        let outcome = await server.ssh(
            names.map { "printf '%s\\n' \"$\($0)\"" }.joined(separator: "; "),
            options: ["-o", "SetEnv=CODER_WORKSPACE_NAME=mine CODER_AGENT_TOKEN=forged"])
        let lines = outcome.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
        #expect(
            lines.dropLast() == [
                "ws", "main", "tok-123", "/opt/agent gitssh --", "https://{{port}}--main--ws--alice.apps.example.com",
                "true", "manifest", "secret $HOME", "/opt/agent",
            ], "\(outcome)")
        // A shell's startup files (cargo's, pyenv's) may still put their directories in front.
        #expect(lines.last?.hasSuffix("/data/coder-script-data/bin:/usr/bin:/bin") == true, "\(outcome)")
    }

    /// Sessions count under the name their client gave, normalized (any name, as a 2.11
    /// agent counts them); a JetBrains-typed session does not count.
    @Test func sessionsCountUnderTheirClientsName() async throws {
        let server = try await SSHSessionTests.Server()
        defer { Task { await server.stop() } }
        let counts = server.server.counts
        func start(_ type: String?) throws -> ChildProgram.Running {
            var arguments: [String] = [
                "ssh", "-F", "/dev/null", "-p", String(server.port), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
            ]
            if let type { arguments += ["-o", "SetEnv=CODER_SSH_SESSION_TYPE=" + type] }
            arguments += ["127.0.0.1", "read line"]
            return try #require(ChildProgram.start(arguments))
        }
        let sessions = try [start(nil), start("Cursor"), start("VSCode-Insiders"), start("JetBrains")]
        #expect(
            await eventually(timeout: .seconds(60)) { counts.snapshot() == ["ssh": 1, "cursor": 1, "vscode_insiders": 1] },
            "\(counts.snapshot())")
        for child in sessions {
            _ = write(child.stdin, "x\n", 2)
            #expect(await onThread { child.wait() } == 0)
        }
        #expect(await eventually(timeout: .seconds(60)) { counts.snapshot().isEmpty }, "\(counts.snapshot())")
    }
}
