import AgentProto
import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Synchronization
import SwiftProtobuf
import Testing

/// The environment of every command the real agent starts and the user's
/// secrets (manifest field 19), end to end against the control-plane double.
@Suite(.timeLimit(.minutes(4)))
struct WorkspaceAgentCommandEnvironmentTests {
    static let names = [
        "CODER", "CODER_WORKSPACE_NAME", "CODER_WORKSPACE_AGENT_NAME", "CODER_WORKSPACE_OWNER_NAME", "CODER_WORKSPACE_ID",
        "CODER_AGENT_TOKEN", "GIT_SSH_COMMAND", "CS_DISABLE_GETTING_STARTED_OVERRIDE", "VSCODE_PROXY_URI", "AGENT_ONLY", "SHARED_MA",
        "SHARED_MS", "EXPANDED", "GIT_ASKPASS",
    ]
    /// One line per name: `NAME=value` (empty when unset), then the PATH.
    static let printer = names.map { "printf '%s=%s\\n' \($0) \"$\($0)\"" }.joined(separator: "; ") + "; printf 'PATH=%s\\n' \"$PATH\""

    static func manifest(home: String, secretValue: String, fileValue: String) -> Coder_Agent_V2_Manifest {
        var manifest = ControlPlaneDouble.defaultManifest
        manifest.workspaceID = Data([0x0b, 0x7c, 0x6d, 0x5e, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 1])
        manifest.vsCodePortProxyUri = "https://{{port}}--main--ws--alice.apps.example.com"
        manifest.directory = home
        manifest.environmentVariables = [
            "SHARED_MA": "from-manifest", "SHARED_MS": "from-manifest", "GIT_ASKPASS": "from-manifest", "EXPANDED": "$HOME/x",
        ]
        manifest.secrets = [
            ControlPlaneDouble.secret(env: "SHARED_MS", Array(secretValue.utf8)),
            ControlPlaneDouble.secret(env: "GIT_ASKPASS", Array("secret-askpass".utf8)),
            ControlPlaneDouble.secret(env: "BROKEN", Array("nul\0inside".utf8)),
            ControlPlaneDouble.secret(file: "~/.secrets/token", Array(fileValue.utf8)),
        ]
        manifest.scripts = [ScriptsHarness.script("{ " + printer + "; } > \"$HOME/script.env\"; cat \"$HOME/.secrets/token\" > \"$HOME/script-saw-file\"")]
        var metadata = Coder_Agent_V2_WorkspaceAgentMetadata.Description()
        metadata.key = "precedence"
        metadata.script = "printf '%s|%s' \"$SHARED_MS\" \"$GIT_ASKPASS\""
        metadata.interval = Google_Protobuf_Duration(seconds: 1)
        metadata.timeout = Google_Protobuf_Duration(seconds: 10)
        manifest.metadata = [metadata]
        return manifest
    }

    /// `NAME=value` lines as a dictionary.
    static func parse(_ text: String) -> [String: String] {
        var result: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            result[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return result
    }

    static func runProcess(_ client: RawHTTPClient, _ command: String) async throws -> String {
        let body = String(decoding: try JSONSerialization.data(withJSONObject: ["command": command]), as: UTF8.self)
        let start = try await client.request("POST", "/api/v0/processes/start", json: body)
        let id = try #require(jsonObject(start.body)?["id"] as? String, "\(start)")
        let out = try await client.request("GET", "/api/v0/processes/\(id)/output?wait=true")
        return jsonObject(out.body)?["output"] as? String ?? ""
    }

    /// The precedence every command sees: predefined over inherited, the manifest over
    /// both, a secret over the manifest (raw), `GIT_ASKPASS` over all, the bin dir first.
    static func checkTable(_ env: [String: String], token: String, home: String, secret: String, _ where_: String) {
        let executable = URL(fileURLWithPath: AgentDaemon.binaryPath).resolvingSymlinksInPath().path
        #expect(env["CODER"] == "true", "\(where_)")
        #expect(env["CODER_WORKSPACE_NAME"] == "ws", "predefined over the agent's own: \(where_)")
        #expect(env["CODER_WORKSPACE_AGENT_NAME"] == "main" && env["CODER_WORKSPACE_OWNER_NAME"] == "alice", "\(where_)")
        #expect(env["CODER_WORKSPACE_ID"] == "0b7c6d5e-0000-4000-8000-000000000001", "\(where_)")
        #expect(env["CODER_AGENT_TOKEN"] == token, "\(where_)")
        #expect(env["GIT_SSH_COMMAND"] == executable + " gitssh --", "\(where_)")
        #expect(env["CS_DISABLE_GETTING_STARTED_OVERRIDE"] == "true", "\(where_)")
        #expect(env["VSCODE_PROXY_URI"] == "https://{{port}}--main--ws--alice.apps.example.com", "\(where_)")
        #expect(env["AGENT_ONLY"] == "agent", "inherited: \(where_)")
        #expect(env["SHARED_MA"] == "from-manifest", "the manifest over the agent's own: \(where_)")
        #expect(env["EXPANDED"] == home + "/x", "the manifest's variables expanded: \(where_)")
        #expect(env["SHARED_MS"] == secret, "a secret over the manifest, unexpanded: \(where_)")
        #expect(env["GIT_ASKPASS"] == executable, "the agent's executable over the manifest and the secret: \(where_)")
        #expect(env["PATH"]?.contains("/coder-script-data/bin:") == true, "the scripts' bin dir on PATH: \(where_)")
    }

    @Test func everyCommandGetsTheTableAndTheSecrets() async throws {
        let home = try ScriptsHarness.directory("env-home")
        defer { try? FileManager.default.removeItem(atPath: home) }
        let firstSecret = "secret-one $HOME ${X}"
        let double = ControlPlaneDouble(manifest: Self.manifest(home: home, secretValue: firstSecret, fileValue: "file-secret-one"))
        let tokenFile = try ScriptsHarness.tokenFile(double)
        try await double.run { url in
            let agent = try AgentDaemon.launch(
                [
                    "--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile, "--ssh-address", "127.0.0.1:0",
                    "--log-level", "debug",
                ],
                environment: ["HOME": home, "AGENT_ONLY": "agent", "SHARED_MA": "from-agent", "CODER_WORKSPACE_NAME": "from-agent"])
            defer { agent.cleanup() }
            let client = RawHTTPClient(port: try await agent.port())
            #expect(await eventually(timeout: .seconds(60)) { double.recorded.withLock { $0.lifecycle.last } == .ready }, "\(agent.log)")

            // The start script: the table, and the file written before it ran.
            let script = try String(contentsOfFile: home + "/script.env", encoding: .utf8)
            Self.checkTable(Self.parse(script), token: double.token, home: home, secret: firstSecret, "script")
            #expect(try String(contentsOfFile: home + "/script-saw-file", encoding: .utf8) == "file-secret-one")
            var info = stat()
            #expect(stat(home + "/.secrets/token", &info) == 0 && info.st_mode & 0o777 == 0o600)
            #expect(stat(home + "/.secrets", &info) == 0 && info.st_mode & 0o777 == 0o700)

            // The process API.
            Self.checkTable(Self.parse(try await Self.runProcess(client, Self.printer)), token: double.token, home: home, secret: firstSecret, "process")

            // An SSH session.
            let sshPort = await agent.sshPort()
            #expect(!sshPort.isEmpty)
            let ssh = await ChildProgram.run([
                "ssh", "-F", "/dev/null", "-p", sshPort, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "SetEnv=CODER_AGENT_TOKEN=forged", "127.0.0.1", Self.printer,
            ])
            Self.checkTable(Self.parse(ssh.stdout), token: double.token, home: home, secret: firstSecret, "ssh")

            // A metadata command.
            let executable = URL(fileURLWithPath: AgentDaemon.binaryPath).resolvingSymlinksInPath().path
            #expect(
                await eventually(timeout: .seconds(60)) {
                    double.recorded.withLock { r in r.metadataBatches.flatMap(\.metadata).last { $0.key == "precedence" }?.result.value }
                        == firstSecret + "|" + executable
                }, "\(agent.log)")

            // A secret changed in coderd reaches the file and new commands after the next fetch.
            double.setManifest(Self.manifest(home: home, secretValue: "secret-two", fileValue: "file-secret-two"))
            await double.dropConnections()
            #expect(
                await eventually(timeout: .seconds(60)) {
                    (try? String(contentsOfFile: home + "/.secrets/token", encoding: .utf8)) == "file-secret-two"
                }, "\(agent.log)")
            #expect(
                await eventually(timeout: .seconds(60)) {
                    (try? await Self.runProcess(client, "printf %s \"$SHARED_MS\"")) == "secret-two"
                })

            // Never shown: not in /debug/manifest, the log, or the agent's own environment and command line.
            let debug = try await client.request("GET", "/debug/manifest")
            #expect(debug.status == 200)
            let shown = [
                String(decoding: debug.body, as: UTF8.self), agent.log,
                (try? String(contentsOfFile: "/proc/\(agent.pid)/environ", encoding: .utf8)) ?? "",
                (try? String(contentsOfFile: "/proc/\(agent.pid)/cmdline", encoding: .utf8)) ?? "",
            ]
            for (index, text) in shown.enumerated() {
                for value in ["secret-one", "secret-two", "file-secret", "secret-askpass", "nul\0inside", double.token] {
                    #expect(!text.contains(value), "\(value) shown in \(["/debug/manifest", "log", "environ", "cmdline"][index])")
                }
            }
            #expect(agent.log.contains("secret variable not set") && agent.log.contains("BROKEN"), "the refused one is named")
            agent.signal(SIGTERM)
            #expect(await agent.exitStatus() == 0, "\(agent.log)")
        }
    }
}
