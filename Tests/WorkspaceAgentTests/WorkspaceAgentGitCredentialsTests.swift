import AgentProto
import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Synchronization
import Testing

/// The git credentials through the real agent: VS Code's settings before the first start
/// script, `CODER_AGENT_URL` for commands, and `--hide-agent-token` (no command gets the token;
/// the in-workspace commands ask the agent over its socket).
@Suite(.timeLimit(.minutes(4)))
struct WorkspaceAgentGitCredentialsTests {
    static let externalAuth = "/api/v2/workspaceagents/me/external-auth"

    static func manifest(home: String) -> Coder_Agent_V2_Manifest {
        var manifest = ControlPlaneDouble.defaultManifest
        manifest.directory = home
        manifest.gitAuthConfigs = 1
        // The start script sees the editors' settings already written.
        manifest.scripts = [ScriptsHarness.script("cat \"$HOME/.vscode-server/data/Machine/settings.json\" > \"$HOME/script-saw-settings\"")]
        return manifest
    }

    /// An agent given its token in a file, or (`tokenInEnvironment`) in `CODER_AGENT_TOKEN`, as
    /// templates usually do.
    static func withAgent(
        hideToken: Bool, tokenInEnvironment: Bool = false,
        _ body: @escaping @Sendable (AgentDaemon, RawHTTPClient, ControlPlaneDouble, _ home: String) async throws -> Void
    ) async throws {
        let home = try ScriptsHarness.directory("git-credentials-home")
        defer { try? FileManager.default.removeItem(atPath: home) }
        let double = ControlPlaneDouble(manifest: Self.manifest(home: home))
        double.externalAuth.withLock { $0.providers = [DoubleExternalAuthProvider(id: "github", regex: #"^https://github\.com"#)] }
        double.linkExternalAuth("github", token: "gho_from_coderd")
        let tokenFile = try ScriptsHarness.tokenFile(double)
        try await double.run { url in
            let token = tokenInEnvironment ? [] : ["--agent-token-file", tokenFile]
            let agent = try AgentDaemon.launch(
                ["--http-address", "127.0.0.1:0", "--agent-url", url, "--hide-agent-token", hideToken ? "true" : "false"] + token,
                environment: tokenInEnvironment ? ["HOME": home, "CODER_AGENT_TOKEN": double.token] : ["HOME": home])
            defer { agent.cleanup() }
            let client = RawHTTPClient(port: try await agent.port())
            #expect(await eventually(timeout: .seconds(60)) { double.recorded.withLock { $0.lifecycle.last } == .ready }, "\(agent.log)")
            try await body(agent, client, double, home)
        }
    }

    /// What a command started by the agent sees, and what `external-auth access-token` prints.
    static func command(_ client: RawHTTPClient) async throws -> String {
        try await WorkspaceAgentCommandEnvironmentTests.runProcess(
            client, "printf '%s|%s|' \"${CODER_AGENT_TOKEN-unset}\" \"${CODER_AGENT_URL-unset}\"; '\(AgentDaemon.binaryPath)' external-auth access-token github")
    }

    @Test func vsCodeIsToldToUseTheAgentsAskpassBeforeTheStartScripts() async throws {
        try await Self.withAgent(hideToken: false) { agent, _, _, home in
            let seen = try String(contentsOfFile: home + "/script-saw-settings", encoding: .utf8)
            #expect(seen.contains("\"git.useIntegratedAskPass\": false") && seen.contains("\"github.gitAuthentication\": false"), "\(agent.log)")
            var info = stat()
            #expect(stat(home + "/.cursor-server/data/Machine/settings.json", &info) == 0 && info.st_mode & 0o777 == 0o600)
        }
    }

    @Test func commandsGetTheTokenAndTheURLByDefault() async throws {
        try await Self.withAgent(hideToken: false) { _, client, double, _ in
            let output = try await Self.command(client)
            let parts = output.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            #expect(parts.count == 3, "\(output)")
            #expect(parts.first == double.token)
            #expect(parts.dropFirst().first?.hasPrefix("http://127.0.0.1:") == true, "CODER_AGENT_URL though the agent was given --agent-url only")
            #expect(parts.last == "gho_from_coderd")
        }
    }

    /// Given in a file or inherited (the variable the agent read must not reach a command
    /// through the environment it passes on).
    @Test(arguments: [false, true])
    func withTheTokenHiddenCommandsAskTheAgent(tokenInEnvironment: Bool) async throws {
        try await Self.withAgent(hideToken: true, tokenInEnvironment: tokenInEnvironment) { agent, client, double, _ in
            let output = try await Self.command(client)
            #expect(output.hasPrefix("unset|http://127.0.0.1:"), "no command sees the token: \(output)")
            #expect(output.hasSuffix("|gho_from_coderd"), "\(output) \(agent.log)")
            // coderd was asked by the agent, with its own token.
            let asked = double.httpRequests.filter { $0.path == Self.externalAuth }
            #expect(asked.count == 1 && asked.first?.header("Coder-Session-Token") == double.token)
            #expect(asked.first?.queryValue("id") == "github")
            // The socket serves those routes only.
            let refused = try await WorkspaceAgentCommandEnvironmentTests.runProcess(
                client, "printf '%s' \"${CODER_AGENT_SOCKET_PATH-unset}\"")
            #expect(refused != "unset" && !refused.isEmpty)
        }
    }
}
