import AgentCore
import AgentTestSupport
import Foundation
import Synchronization
import Testing

@testable import MCPEngine

/// No secret through the configuration or the logs: `CODER_AGENT_*` never expands for a
/// server, a server's stderr is redacted before it is logged, and redaction replaces an
/// entry's secret-bearing values (8 bytes and more) in that entry's texts, not every word.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct MCPSecretsTests {
    static let agentToken = "secret-agent-token-4242"

    /// A `.mcp.json` in a fresh directory, an engine over it (logging to `log`), its task.
    final class Engine: Sendable {
        let directory: String
        let manager: MCPServerManager
        let log = CapturedLog()
        let task = Mutex<Task<Void, Never>?>(nil)

        init(_ servers: [String: [String: Any]], environment: [String: String] = MCPTestServers.environment) throws {
            directory = NSTemporaryDirectory() + "mcp-secrets-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let data = try JSONSerialization.data(withJSONObject: ["mcpServers": servers])
            try data.write(to: URL(fileURLWithPath: directory + "/.mcp.json"))
            manager = MCPServerManager(
                configuration: .init(
                    configFiles: [".mcp.json"], clientVersion: "test",
                    restart: MCPRestartPolicy(initial: .seconds(30), maximum: .seconds(30), stable: .seconds(60)),
                    timing: .init(stdinGrace: .milliseconds(500), termGrace: .milliseconds(500))),
                home: directory, directory: directory, environment: environment, agentToken: MCPSecretsTests.agentToken,
                manifest: ManifestStore(), gate: .open, catalog: MCPCatalog(), logger: log.logger)
            let manager = self.manager
            task.withLock { $0 = Task { try? await manager.run() } }
        }

        func stop() async {
            let running = task.withLock { $0 }
            running?.cancel()
            await running?.value
            try? FileManager.default.removeItem(atPath: directory)
        }

        func server(_ name: String) -> MCPServerStatus? { manager.servers.first { $0.name == name } }
    }

    static let testServer = "\(MCPTestServers.directory)/mcp_test_server.py"

    // MARK: 6. The agent's variables

    @Test func agentVariablesExpandToNothingWithAWarning() throws {
        let json = #"""
            {"mcpServers": {"s": {"command": "x", "env": {
                "A": "${CODER_AGENT_TOKEN}", "B": "pre-$CODER_AGENT_URL-post", "C": "$HOME", "D": "${CODER_AGENT_TOKEN_FILE}"}}}}
            """#
        let environment = [
            "CODER_AGENT_TOKEN": "some-secret", "CODER_AGENT_URL": "https://coder.example", "CODER_AGENT_TOKEN_FILE": "/t",
            "HOME": "/home/u",
        ]
        let file = try MCPConfigFile.parse(Array(json.utf8), environment: { environment[$0] })
        let server = try #require(file.servers.first)
        #expect(server.env == ["A": "", "B": "pre--post", "C": "/home/u", "D": ""])
        #expect(file.warnings.count == 1)
        let warning = try #require(file.warnings.first)
        #expect(warning.message.contains("$CODER_AGENT_TOKEN") && warning.message.contains("$CODER_AGENT_URL"), "\(warning.message)")
        #expect(!warning.message.contains("some-secret"))
        #expect(file.entryErrors.isEmpty)
    }

    /// A real server started from an entry whose `env` names the token gets nothing of it.
    @Test func tokenReferenceNeverReachesTheServer() async throws {
        let seen = NSTemporaryDirectory() + "mcp-secrets-env-\(UUID().uuidString)"
        defer { unlink(seen) }
        var environment = MCPTestServers.environment
        environment["CODER_AGENT_TOKEN"] = "some-secret"
        let script = "printf '%s|%s' \"$LEAK\" \"$CODER_AGENT_TOKEN\" > '\(seen)'; exec python3 '\(Self.testServer)'"
        let engine = try Engine(["s": ["command": "/bin/sh", "args": ["-c", script], "env": ["LEAK": "${CODER_AGENT_TOKEN}"]]], environment: environment)
        #expect(await eventually { engine.server("s")?.state == .connected }, "\(engine.log.text)")
        let written = (try? String(contentsOfFile: seen, encoding: .utf8)) ?? "?"
        #expect(written == "|", "the server saw \(written)")
        #expect(engine.log.contains("$CODER_AGENT_TOKEN"), "no warning logged: \(engine.log.text)")
        #expect(!engine.log.contains("some-secret"))
        await engine.stop()
    }

    // MARK: 7. Stderr

    @Test func serverStderrIsRedactedBeforeItIsLogged() async throws {
        let key = "sk-live-0123456789abcdef"
        let script = "echo \"leaked $API_KEY \(Self.agentToken) done\" >&2; exec python3 '\(Self.testServer)'"
        let engine = try Engine(["s": ["command": "/bin/sh", "args": ["-c", script], "env": ["API_KEY": key]]])
        #expect(await eventually { engine.log.contains("leaked") }, "\(engine.log.text)")
        let line = try #require(engine.log.all.first { $0.message.contains("leaked") })
        #expect(line.message == "leaked [redacted] [redacted] done", "\(line.message)")
        #expect(!engine.log.contains(key) && !engine.log.contains(Self.agentToken))
        await engine.stop()
    }

    // MARK: 8. Whole values, per entry

    @Test func shortValuesAndNamesAreNotSecrets() {
        let server = MCPServerConfig(
            name: "a", transport: "stdio", command: "sh", args: ["-c", "exit", "server", "--verbose=true", "crash"],
            env: ["MODE": "true", "WHEN": "crash"])
        let redactor = ContextRedactor(secrets: [Self.agentToken]).adding(servers: [server])
        let text = #"initialize: exit status 1 "servery" crashed, verbose=true"#
        #expect(redactor.scrub(text, server: "a") == text)
        #expect(redactor.scrub(text, server: "b") == text)
        #expect(redactor.scrub(text) == text)
    }

    /// An entry's texts are searched for its 256 longest secrets at most: an entry of
    /// 70 000 `--x=value` arguments made each line its server printed 70 000 searches. The
    /// agent token is searched for always.
    @Test func anEntrysSecretsAreBounded() {
        let args = (0..<5000).map { "--x\($0)=secret-value-\(String(repeating: "z", count: $0 % 300))-\($0)" }
        let server = MCPServerConfig(name: "a", transport: "stdio", command: "sh", args: args, env: [:])
        let redactor = ContextRedactor(secrets: [Self.agentToken]).adding(servers: [server])
        #expect(redactor.entrySecrets["a"]?.count == ContextRedactor.maxSecretsPerEntry)
        let longest = "secret-value-\(String(repeating: "z", count: 299))-299"
        #expect(redactor.scrub("\(longest) \(Self.agentToken)", server: "a") == "[redacted] [redacted]")
        // The fields made for secrets come first: an env token shorter than every argument
        // is still scrubbed.
        let withEnv = MCPServerConfig(name: "a", transport: "stdio", command: "sh", args: args, env: ["TOKEN": "short-env-token-1"])
        let both = ContextRedactor(secrets: [Self.agentToken]).adding(servers: [withEnv])
        #expect(both.entrySecrets["a"]?.count == ContextRedactor.maxSecretsPerEntry)
        #expect(both.scrub("short-env-token-1", server: "a") == "[redacted]")
    }

    @Test func secretBearingFieldsAreRedactedInTheirEntrysTexts() {
        let server = MCPServerConfig(
            name: "a", transport: "http", command: "", args: ["--api-key", "k3y-0123456789", "--token=t0ken-abcdefgh", "positional-name"],
            env: ["KEY": "envsecret-123"], url: "https://user:pa55word-xyz@host/mcp/zap0123456789abcdef/sse?key=query-secret-1",
            headers: ["Authorization": "Bearer ghp_abcdefgh12345678"])
        let redactor = ContextRedactor(secrets: [Self.agentToken]).adding(servers: [server])
        let text =
            "k3y-0123456789 t0ken-abcdefgh envsecret-123 pa55word-xyz zap0123456789abcdef query-secret-1 ghp_abcdefgh12345678 "
            + "positional-name mcp sse \(Self.agentToken)"
        let own = redactor.scrub(text, server: "a")
        #expect(own == Array(repeating: "[redacted]", count: 7).joined(separator: " ") + " positional-name mcp sse [redacted]", "\(own)")
        // Another entry's texts: only the agent token.
        let other = redactor.scrub(text, server: "b")
        #expect(other == text.replacingOccurrences(of: Self.agentToken, with: "[redacted]"), "\(other)")
        // A text of no one entry: every entry's secrets.
        #expect(redactor.scrub(text) == own)
    }

    /// One entry's everyday values (8 bytes and more: `initialize`) do not rewrite another
    /// server's errors.
    @Test func oneEntrysValuesDoNotRedactAnotherServersErrors() async throws {
        let engine = try Engine([
            "a": ["command": "python3", "args": [Self.testServer], "env": ["STAGE": "initialize", "OUTCOME": "exit status 3"]],
            "b": ["command": "/bin/sh", "args": ["-c", "exit 3"]],
        ])
        #expect(await eventually { !(engine.server("b")?.lastError.isEmpty ?? true) }, "\(engine.log.text)")
        let error = try #require(engine.server("b")?.lastError)
        #expect(!error.contains("[redacted]"), "\(error)")
        #expect(error.contains("exit status 3"), "\(error)")
        await engine.stop()
    }
}
