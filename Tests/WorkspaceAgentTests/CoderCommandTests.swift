import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A directory holding a `coder` link to the built binary, the name a template's bootstrap
/// gives the agent.
struct CoderLink {
    let directory: String
    var path: String { directory + "/coder" }

    init() throws {
        directory = NSTemporaryDirectory() + "coder-link-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try #require(symlink(AgentDaemon.binaryPath, directory + "/coder") == 0)
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }

    /// `coder <arguments>` to its end under `env -i` with `environment` (no other CODER_*).
    /// The agent socket is one in this directory unless `environment` names one: an agent
    /// the host runs at the default path (`make run` beside `make test`) is never asked.
    func run(_ arguments: [String], environment: [String: String] = [:]) async -> ChildProgram.Outcome {
        var environment = environment
        if environment["CODER_AGENT_SOCKET_PATH"] == nil { environment["CODER_AGENT_SOCKET_PATH"] = directory + "/no-agent.sock" }
        let variables = ["PATH=/usr/bin:/bin", "HOME=\(directory)", "TMPDIR=\(directory)"] + environment.map { "\($0.key)=\($0.value)" }
        return await ChildProgram.run(["/usr/bin/env", "-i"] + variables + [path] + arguments, stderrToStdout: true)
    }
}

/// The binary run as `coder`: the reference's command line, texts and exit codes.
@Suite(.timeLimit(.minutes(2)))
struct CoderCommandTests {
    static let url = "http://127.0.0.1:9"

    static func failure(_ command: String, _ message: String) -> String {
        "Encountered an error running \"\(command)\", see \"\(command) --help\" for more information\nerror: \(message)\n"
    }

    /// `coder agent`'s settings errors, word for word as the reference's (`cli/root.go`,
    /// `cli/agent.go`), all exit status 1.
    @Test(
        arguments: [
            ([], [:], "create agent client: CODER_AGENT_URL must be set"),
            ([], ["CODER_AGENT_URL": url], "create agent client: Either CODER_AGENT_TOKEN or CODER_AGENT_TOKEN_FILE must be set"),
            (["--agent-url", url, "--auth", "bogus"], [:], "create agent client: unknown agent auth type: bogus"),
            ([], ["CODER_AGENT_URL": url, "CODER_AGENT_AUTH": "Token"], "create agent client: unknown agent auth type: Token"),
            (["--agent-url", url, "--auth", "aws-instance-identity", "--agent-header", "X-Nothing"], [:], "configure header transport: split header \"X-Nothing\" had less than two parts"),
            ([], ["CODER_AGENT_URL": url, "CODER_AGENT_TOKEN": "t", "CODER_AGENT_HEADER": "X-A=1,X-B"], "configure header transport: split header \"X-B\" had less than two parts"),
            (["--agent-url", url, "--agent-token", "t", "--agent-header-command", "echo X-A=1; exit 3"], [:], "configure header transport: failed to run [sh -c echo X-A=1; exit 3]: exit status 3"),
            (["--agent-url", url, "--agent-token", "t", "--agent-header-command", "echo X-A=1; echo oops >&2; echo no-equals"], [:], "configure header transport: split header \"no-equals\" had less than two parts"),
            (["--agent-url", url, "--agent-token-file", "/nonexistent/token"], [:], "create agent client: read token file \"/nonexistent/token\": no such file or directory"),
            ([], ["CODER_AGENT_URL": "ftp://host", "CODER_AGENT_TOKEN": "t"], "create agent client: CODER_AGENT_URL: invalid URL \"ftp://host\" (expected http(s)://host[:port])"),
            ([], ["CODER_AGENT_URL": url, "CODER_AGENT_TOKEN": "t", "CODER_AGENT_SUBSYSTEM": "envbox, envbuilder,bogus"], "invalid subsystem \"bogus\""),
            (["--agent-url", url, "--agent-token", "t", "--tailnet-listen-port", "70000"], [:], "--tailnet-listen-port: invalid port \"70000\" (expected 0 to 65535)"),
            (["--no-such-flag"], [:], "Unknown option '--no-such-flag'"),
        ] as [([String], [String: String], String)])
    func agentSettingsFailAsTheReference(arguments: [String], environment: [String: String], message: String) async throws {
        let link = try CoderLink()
        defer { link.remove() }
        let outcome = await link.run(["agent"] + arguments, environment: environment)
        #expect(outcome.status == 1)
        #expect(outcome.stdout == Self.failure("coder agent", message), "\(outcome.stdout)")
    }

    /// An agent socket of another user is not the agent's: a command without a token does
    /// not use a socket file another user (not root) owns, and refuses a server of another
    /// user unless it runs this executable (root's commands, `sudo git` in a workspace whose
    /// agent runs as its user). Another user of a shared /tmp could have listened at the
    /// default path first. Before, the command sent its request there and waited 30 s.
    @Test func anAgentSocketOfAnotherUserIsNotUsed() async throws {
        guard SilentUnixListener.available else {
            print("skipped: the test needs root, setpriv and python3 to run as other users")
            return
        }
        let link = try CoderLink()
        defer { link.remove() }
        chmod(link.directory, 0o777)
        let path = link.directory + "/agent.sock"
        // A listener of uid 65533 that accepts, reads and never answers.
        let server = try #require(SilentUnixListener.start(at: path, uid: 65533))
        defer { server.kill() }
        let environment = ["PATH=/usr/bin:/bin", "HOME=\(link.directory)", "TMPDIR=\(link.directory)", "CODER_AGENT_SOCKET_PATH=\(path)"]
        let command = [link.path, "external-auth", "access-token", "github"]
        // Another user's command: the file is not its user's, so it is not tried.
        let other = await ChildProgram.run(
            ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/env", "-i"] + environment + command, stderrToStdout: true)
        #expect(other.status == 1)
        #expect(other.stdout.contains("error: agent token not found"), "\(other.stdout)")
        // Root's: tried, and its server refused before anything is sent.
        let root = await ChildProgram.run(["/usr/bin/env", "-i"] + environment + command, stderrToStdout: true)
        #expect(root.status == 1)
        #expect(root.stdout.contains("is served by a process of another user (uid 65533), not the agent: refused"), "\(root.stdout)")
    }

    /// The git helpers' errors name them as the reference's hidden subcommands do.
    @Test func gitHelperErrorsNameTheirCommand() async throws {
        let link = try CoderLink()
        defer { link.remove() }
        let outcome = await link.run(["gitssh", "--", "host"], environment: ["CODER_AGENT_URL": Self.url])
        #expect(outcome.status == 1)
        #expect(
            outcome.stdout == Self.failure("coder gitssh", "create agent client: Either CODER_AGENT_TOKEN or CODER_AGENT_TOKEN_FILE must be set"),
            "\(outcome.stdout)")
    }

    /// A token file holding only whitespace is no token.
    @Test func anEmptyTokenFileIsNoToken() async throws {
        let link = try CoderLink()
        defer { link.remove() }
        let file = link.directory + "/token"
        try TestFile.write(file, " \n\t\n")
        let outcome = await link.run(["agent", "--agent-token-file", file], environment: ["CODER_AGENT_URL": Self.url])
        #expect(outcome.status == 1)
        #expect(outcome.stdout == Self.failure("coder agent", "create agent client: CODER_AGENT_TOKEN or CODER_AGENT_TOKEN_FILE must be set for token auth"))
    }

    /// Bare `coder` is help (never a second agent); a subcommand it does not serve (`run`
    /// included) is named; `exp` is there with its own errors.
    @Test func theCommandsItServes() async throws {
        let link = try CoderLink()
        defer { link.remove() }
        let help = await link.run([])
        #expect(help.status == 0)
        #expect(help.stdout.contains("USAGE: coder <subcommand>") && help.stdout.contains("  agent ") && help.stdout.contains("  exp "), "\(help.stdout)")
        #expect(!help.stdout.contains("  run "))
        let agentHelp = await link.run(["agent", "--help"])
        #expect(agentHelp.status == 0 && agentHelp.stdout.contains("USAGE: coder agent"), "\(agentHelp.stdout)")
        for flag in [
            "--agent-url", "--auth", "--agent-token ", "--agent-token-file", "--agent-name", "--log-dir", "--debug-address",
            "--pprof-address", "--no-reap", "--tailnet-listen-port", "--devcontainers-enable", "--agent-firewall-log-proxy-socket-path",
        ] {
            #expect(agentHelp.stdout.contains(flag), "coder agent --help lacks \(flag)")
        }
        #expect(!agentHelp.stdout.contains("--boundary-log-proxy-socket-path "), "the old name is hidden")
        for words in [["bogus"], ["run"]] {
            let unknown = await link.run(words)
            #expect(unknown.status == 1)
            #expect(unknown.stdout == "coder: unknown subcommand '\(words[0])' for 'coder'; see 'coder --help'\n", "\(unknown.stdout)")
        }
        let ping = await link.run(["exp", "sync", "ping", "--socket-path", link.directory + "/none.sock"])
        #expect(ping.status == 1 && ping.stdout.hasPrefix("error: "), "\(ping.stdout)")
        let version = await link.run(["--version"])
        #expect(version.status == 0 && version.stdout.hasPrefix("0."), "\(version.stdout)")
    }

    /// Under its own name the same settings keep the agent's usage status (64), and without
    /// a URL it runs standalone as before.
    @Test(
        arguments: [
            (["--auth", "bogus"], [:], "workspace-agent: unknown agent auth type: bogus"),
            ([], ["CODER_AGENT_SUBSYSTEM": "exectrace,,bogus"], "workspace-agent: invalid subsystem \"bogus\""),
            (["--agent-url", "http://127.0.0.1:9"], [:], "workspace-agent: Either CODER_AGENT_TOKEN or CODER_AGENT_TOKEN_FILE must be set"),
            (["--debug-address", "nowhere"], [:], "workspace-agent: --debug-address: "),
            (["--pprof-address", "nowhere"], [:], "workspace-agent: --pprof-address: "),
            (["--devcontainers-enable", "maybe"], [:], "workspace-agent: --devcontainers-enable: invalid boolean \"maybe\" (expected true or false)"),
        ] as [([String], [String: String], String)])
    func theWorkspaceAgentNameKeepsItsRules(arguments: [String], environment: [String: String], message: String) async throws {
        let agent = try AgentDaemon.launch(arguments, environment: environment)
        defer { agent.cleanup() }
        #expect(await agent.exitStatus() == 64)
        #expect(agent.log.hasPrefix(message) && agent.log.split(separator: "\n").count == 1, "\(agent.log)")
    }
}

/// `coder agent` running: the reference's variables and flags reach the control plane, the
/// token leaves the process list, children find the binary's directory on PATH.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct CoderAgentTests {
    enum TokenSource: String, CaseIterable, Sendable {
        /// CODER_AGENT_URL and CODER_AGENT_TOKEN, as a template's bootstrap exports them.
        case variables
        /// --agent-url and --agent-token (which the agent blanks in its argv).
        case flags
        /// --agent-token-file, whitespace around the token.
        case file
        /// CODER_AGENT_TOKEN beside a token file holding another token: the variable wins.
        case variableOverFile
    }

    @Test(arguments: TokenSource.allCases)
    func connectsWithTheReferencesSettings(_ source: TokenSource) async throws {
        let link = try CoderLink()
        defer { link.remove() }
        let double = ControlPlaneDouble()
        let wrong = link.directory + "/wrong-token"
        try TestFile.write(wrong, "00000000-0000-4000-8000-000000000000\n")
        try await double.run { url in
            var arguments = ["agent", "--http-address", "127.0.0.1:0"]
            var environment = ["CODER_AGENT_AUTH": "token", "PATH": "/usr/bin:/bin"]
            switch source {
            case .variables:
                environment["CODER_AGENT_URL"] = url
                environment["CODER_AGENT_TOKEN"] = double.token
            case .flags:
                arguments += ["--agent-url", url, "--agent-token", double.token]
            case .file:
                let file = link.directory + "/token"
                try TestFile.write(file, "\n  \(double.token) \t\n")
                arguments += ["--agent-url=\(url)", "--agent-token-file", file]
            case .variableOverFile:
                environment["CODER_AGENT_URL"] = url
                environment["CODER_AGENT_TOKEN"] = double.token
                environment["CODER_AGENT_TOKEN_FILE"] = wrong
            }
            let agent = try AgentDaemon.launch(arguments, environment: environment, executable: link.path)
            defer { agent.cleanup() }
            #expect(await eventually(timeout: .seconds(60)) { double.recorded.withLock { !$0.startups.isEmpty } }, "\(agent.log)")
            #expect(double.recorded.withLock { $0.refusals.isEmpty }, "\(agent.log)")

            let commandLine = (try? String(contentsOfFile: "/proc/\(agent.pid)/cmdline", encoding: .utf8)) ?? ""
            #expect(commandLine.contains("\0agent\0") && !commandLine.contains(double.token), "\(commandLine)")

            // A child's PATH ends with the binary's own directory (links resolved), after the
            // agent's own PATH (which the scripts' bin directory precedes).
            let port = try await agent.port()
            let client = RawHTTPClient(port: port)
            let start = try await client.request("POST", "/api/v0/processes/start", json: #"{"command":"echo \"$PATH\""}"#)
            let id = try #require(jsonObject(start.body)?["id"] as? String, "\(start)")
            let out = try await client.request("GET", "/api/v0/processes/\(id)/output?wait=true")
            let path = (jsonObject(out.body)?["output"] as? String ?? "").trimmingCharacters(in: .newlines)
            let directory = URL(fileURLWithPath: AgentDaemon.binaryPath).resolvingSymlinksInPath().deletingLastPathComponent().path
            // The test's PATH ends `/usr/bin:/bin` (whatever precedes it, e.g. the scripts' bin dir).
            #expect(path.hasSuffix("/usr/bin:/bin:" + directory) && path.split(separator: ":").last.map(String.init) == directory, "\(path)")

            agent.signal(SIGTERM)
            #expect(await agent.exitStatus() == 0, "\(agent.log)")
        }
    }
}

/// `make install-link` (the link `make install`, `make install-check` and `make run` make):
/// a relative `coder` link beside the binary, made once, and another `coder` left alone.
@Suite(.timeLimit(.minutes(2)))
struct CoderLinkInstallTests {
    @Test func theLinkIsMadeOnceAndNeverOverAnotherCoder() async throws {
        let destdir = NSTemporaryDirectory() + "install-link-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: destdir) }
        let make = ["make", "--no-print-directory", "-C", PackagingTests.root, "install-link", "DESTDIR=\(destdir)", "BINDIR=/opt/bin"]
        let link = destdir + "/opt/bin/coder"
        for _ in 0..<2 {
            let made = await ChildProgram.run(make, stderrToStdout: true)
            #expect(made.status == 0, "\(made.stdout)")
            #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == "workspace-agent")
        }
        try FileManager.default.removeItem(atPath: link)
        try TestFile.write(link, "#!/bin/sh\necho another coder\n")
        let kept = await ChildProgram.run(make, stderrToStdout: true)
        #expect(kept.status == 0 && kept.stdout.contains("is not a link to workspace-agent: left alone"), "\(kept.stdout)")
        #expect(try String(contentsOfFile: link, encoding: .utf8) == "#!/bin/sh\necho another coder\n")
    }
}
