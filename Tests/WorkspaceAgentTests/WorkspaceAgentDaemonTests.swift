import AgentTestSupport
import Foundation
import Testing

/// The `workspace-agent` executable end to end: flags, env twins, serving, shutdown.
/// Five minutes a test: each starts the debug binary, which a loaded host runs many times
/// slower (`helpExitsZero`).
@Suite(.timeLimit(.minutes(5)))
struct WorkspaceAgentDaemonTests {
    @Test(
        arguments: [
            (["--log-level", "loud"], [:], "--log-level"),
            (["--log-format", "xml"], [:], "--log-format"),
            (["--http-address", "nowhere"], [:], "--http-address"),
            (["--http-address", "127.0.0.1:99999"], [:], "--http-address"),
            (["--proc-prio-mgmt", "maybe"], [:], "--proc-prio-mgmt"),
            (["--release-startup-pages", "sometimes"], [:], "--release-startup-pages"),
            ([], ["CODER_AGENT_RELEASE_STARTUP_PAGES": "perhaps"], "CODER_AGENT_RELEASE_STARTUP_PAGES"),
            ([], ["CODER_AGENT_LOG_LEVEL": "loud"], "CODER_AGENT_LOG_LEVEL"),
            ([], ["CODER_AGENT_HTTP_ADDRESS": "::1:80"], "CODER_AGENT_HTTP_ADDRESS"),
            (["--no-such-flag"], [:], "no-such-flag"),
        ] as [([String], [String: String], String)])
    func badValuesExitNonZeroWithOneLine(arguments: [String], environment: [String: String], names: String) async throws {
        let agent = try AgentDaemon.launch(arguments, environment: environment)
        defer { agent.cleanup() }
        let code = try #require(await agent.exitStatus())
        #expect(code == 64)
        let lines = agent.log.split(separator: "\n")
        #expect(lines.count == 1, "\(agent.log)")
        #expect(agent.log.contains(names))
    }

    /// An unknown subcommand says so, with the usage exit status (64), at
    /// every level; `exp` is listed; usages name exactly one unit; `--version` names the
    /// commit.
    @Test(arguments: [
        (["exp", "sync", "wait", "foo"], "unknown subcommand 'wait' for 'workspace-agent exp sync'"),
        (["exp", "synk"], "unknown subcommand 'synk' for 'workspace-agent exp'"),
        (["frobnicate"], "unknown subcommand 'frobnicate' for 'workspace-agent'"),
    ])
    func unknownSubcommandsAreNamed(arguments: [String], message: String) async throws {
        let (output, status) = await AgentDaemon.command(arguments)
        #expect(status == 64)
        #expect(output.contains(message), "\(output)")
        #expect(output.split(separator: "\n").count == 1)
    }

    /// `--prometheus-address=` (the `=` form, empty) disables the listener as the doc says,
    /// instead of a usage error for a missing value.
    @Test func anEmptyAssignmentIsAnEmptyValue() async throws {
        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--prometheus-address="])
        defer { agent.cleanup() }
        _ = try await agent.port()
        #expect(!agent.log.contains("prometheus metrics listening"), "\(agent.log)")
        #expect(!agent.log.contains("Missing value"), "\(agent.log)")
    }

    @Test func helpListsExpAndUsagesNameOneUnit() async throws {
        let root = await AgentDaemon.command(["--help"])
        #expect(root.status == 0)
        #expect(root.output.contains("  exp "), "\(root.output)")
        for command in ["complete", "start", "status"] {
            let help = await AgentDaemon.command(["exp", "sync", command, "--help"])
            #expect(help.status == 0)
            #expect(help.output.contains("USAGE: workspace-agent exp sync \(command) <unit> "), "\(help.output)")
            #expect(!help.output.contains("<units>"))
        }
        let version = await AgentDaemon.command(["--version"])
        #expect(version.status == 0)
        // "0.1.0 (commit 0123456789ab)", "+dirty" for a changed tree, "unknown" outside git.
        #expect(version.output.range(of: #"^\d+\.\d+\.\d+ \(commit ([0-9a-f]{12}(\+dirty)?|unknown)\)\n$"#, options: .regularExpression) != nil, "\(version.output)")
    }

    /// `--help` states the exit statuses the binary uses: a usage error and a start failure
    /// (the HTTP API's address taken) exit with the statuses it names.
    @Test func helpStatesTheExitStatusesTheBinaryUses() async throws {
        let help = await AgentDaemon.command(["--help"])
        #expect(help.status == 0)
        // Help text is wrapped: read it as one line.
        let text = help.output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        func stated(_ pattern: String) -> Int32? {
            guard let range = text.range(of: pattern, options: .regularExpression) else { return nil }
            return Int32(text[range].prefix { $0.isNumber })
        }
        let startFailure = try #require(stated(#"\d+ when the agent cannot start"#), "\(help.output)")
        let usage = try #require(stated(#"\d+ for a usage error"#), "\(help.output)")

        let occupied = try #require(ListeningLoopbackSocket())
        defer { occupied.close() }
        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:\(occupied.port)"])
        defer { agent.cleanup() }
        #expect(await agent.exitStatus() == startFailure, "\(agent.log)")
        #expect(agent.log.contains("cannot listen on 127.0.0.1:\(occupied.port) for the HTTP API"), "\(agent.log)")

        let misuse = await AgentDaemon.command(["--log-level", "loud"])
        #expect(misuse.status == usage, "\(misuse.output)")
    }

    /// The waits are wide: `run --help` takes 1.5 s of CPU in the debug build (the parser
    /// lays out every option's help), and a loaded run was seen to need more than 30 s for it.
    @Test func helpExitsZero() async throws {
        let root = try AgentDaemon.launch(["--help"])
        defer { root.cleanup() }
        #expect(await root.exitStatus(timeout: .seconds(120)) == 0)
        #expect(root.log.contains("run"))
        let agent = try AgentDaemon.launch(["run", "--help"])
        defer { agent.cleanup() }
        #expect(await agent.exitStatus(timeout: .seconds(120)) == 0)
        #expect(agent.log.contains("--http-address"))
        #expect(agent.log.contains("CODER_AGENT_HTTP_ADDRESS"))
    }

    /// SIGTERM: stop accepting, terminate every process group (grandchildren too), exit 0.
    @Test func servesAndShutsDownGracefullyOnSIGTERM() async throws {
        let grandchild = "sleep 331.\(Int.random(in: 1000...9999))"
        let dir = NSTemporaryDirectory() + "agent-dir-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--directory", dir])
        defer { agent.cleanup() }
        let client = RawHTTPClient(port: try await agent.port())
        #expect(try await client.request("GET", "/healthz").status == 200)

        let pwd = try await client.request("POST", "/api/v0/processes/start", json: #"{"command":"pwd"}"#)
        let pwdID = try #require(jsonObject(pwd.body)?["id"] as? String)
        let out = try await client.request("GET", "/api/v0/processes/\(pwdID)/output?wait=true")
        #expect(jsonObject(out.body)?["output"] as? String == dir + "\n")

        let bg = try await client.request(
            "POST", "/api/v0/processes/start", json: #"{"command":"\#(grandchild) >/dev/null 2>&1 & sleep 60"}"#)
        #expect(bg.status == 200)
        #expect(await eventually { processExists(commandLine: grandchild) })

        agent.signal(SIGTERM)
        #expect(await agent.exitStatus() == 0, "\(agent.log)")
        // Killed before the agent exited; gone from /proc once reaped (a moment later on a
        // loaded host).
        #expect(await eventually(timeout: .seconds(10)) { !processExists(commandLine: grandchild) })
        #expect(agent.log.contains("workspace agent stopped"))
    }

    @Test func sigintAlsoExitsZero() async throws {
        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0"])
        defer { agent.cleanup() }
        _ = try await agent.port()
        agent.signal(SIGINT)
        #expect(await agent.exitStatus() == 0)
    }

    /// Environment twins configure the agent; a flag beats its twin.
    @Test func environmentTwinsAndFlagPrecedence() async throws {
        let json = try AgentDaemon.launch(
            [],
            environment: [
                "CODER_AGENT_HTTP_ADDRESS": "127.0.0.1:0", "CODER_AGENT_LOG_FORMAT": "json",
            ])
        defer { json.cleanup() }
        _ = try await json.port()
        for line in json.log.split(separator: "\n") {
            #expect(jsonObject(Array(line.utf8)) != nil, "not JSON: \(line)")
        }
        json.signal(SIGTERM)
        #expect(await json.exitStatus() == 0)

        let text = try AgentDaemon.launch(
            ["--log-format", "text"],
            environment: [
                "CODER_AGENT_HTTP_ADDRESS": "127.0.0.1:0", "CODER_AGENT_LOG_FORMAT": "json",
            ])
        defer { text.cleanup() }
        _ = try await text.port()
        #expect(!text.log.hasPrefix("{"))
        text.signal(SIGTERM)
        #expect(await text.exitStatus() == 0)
    }
}
