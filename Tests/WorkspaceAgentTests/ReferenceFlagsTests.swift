import AgentTestSupport
import Foundation
import NIOCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The reference's remaining `coder agent` flags on the real binary: `coder-agent.log` in
/// `--log-dir`, the debug listener, and the flags accepted for compatibility.
@Suite(.timeLimit(.minutes(3)))
struct ReferenceFlagsTests {
    static func directory(_ name: String) throws -> String {
        let path = NSTemporaryDirectory() + "\(name)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// The port the log names for `key` (`debug_address=127.0.0.1:41234`, or in JSON).
    static func loggedPort(_ agent: AgentDaemon, _ key: String) async -> Int? {
        var port: Int?
        _ = await eventually {
            if let range = agent.log.range(of: key + #"[=":]+127\.0\.0\.1:\d+"#, options: .regularExpression) {
                port = Int(agent.log[range].split(separator: ":").last ?? "")
            }
            return port != nil || agent.reap() != nil
        }
        return port
    }

    /// `coder-agent.log` gets debug lines in the text format while stderr stays at info (and
    /// in JSON); `/debug/logs` on the debug listener serves the same lines.
    @Test func theLogFileIsWrittenAtDebug() async throws {
        let logs = try Self.directory("agent-log-dir") + "/nested"
        defer { try? FileManager.default.removeItem(atPath: logs) }
        let agent = try AgentDaemon.launch(
            ["--http-address", "127.0.0.1:0", "--log-format", "json", "--debug-address", "127.0.0.1:0"],
            environment: ["CODER_AGENT_LOG_DIR": logs])
        defer { agent.cleanup() }
        _ = try await agent.port()
        let debugPort = try #require(await Self.loggedPort(agent, "debug_address"), "\(agent.log)")
        let file = logs + "/coder-agent.log"
        var text = ""
        #expect(
            await eventually {
                text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
                return text.contains(" info workspace-agent: agent HTTP API listening address=127.0.0.1:")
            }, "\(text)")
        #expect(text.contains(" debug workspace-agent: services in shutdown order "), "\(text)")
        #expect(!agent.log.contains("services in shutdown order"), "stderr is at info: \(agent.log)")
        #expect(agent.log.contains(#""msg":"agent HTTP API listening""#), "stderr keeps its format")
        var info = stat()
        #expect(stat(file, &info) == 0 && info.st_mode & 0o777 == 0o600)

        let logsAnswer = try await RawHTTPClient(port: debugPort).request("GET", "/debug/logs")
        #expect(logsAnswer.status == 200 && logsAnswer.bodyText.contains(" debug workspace-agent: services in shutdown order "), "\(logsAnswer)")
        agent.signal(SIGTERM)
        #expect(await agent.exitStatus() == 0, "\(agent.log)")
    }

    /// Every flag accepted together (and the subsystems variable); the debug listener serves
    /// the `/debug/` routes but Prometheus and nothing else; the firewall socket is at the new
    /// flag's path although the old one is also given.
    @Test func theAcceptedFlagsAndTheDebugListener() async throws {
        let dir = try Self.directory("accepted-flags")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let socket = dir + "/firewall.sock"
        let agent = try AgentDaemon.launch(
            [
                "--http-address", "127.0.0.1:0", "--debug-address", "127.0.0.1:0", "--pprof-address", "127.0.0.1:6060", "--no-reap",
                "--tailnet-listen-port", "41641", "--devcontainers-enable=false", "--devcontainers-project-discovery-enable", "false",
                "--devcontainers-discovery-autostart-enable", "true", "--agent-firewall-log-proxy-socket-path", socket,
                "--boundary-log-proxy-socket-path", dir + "/old.sock", "--agent-name", "main",
            ],
            environment: ["CODER_AGENT_SUBSYSTEM": " envbox, ,exectrace"])
        defer { agent.cleanup() }
        _ = try await agent.port()
        let debugPort = try #require(await Self.loggedPort(agent, "debug_address"), "\(agent.log)")
        let client = RawHTTPClient(port: debugPort)
        let manifest = try await client.request("GET", "/debug/manifest")
        #expect(manifest.status == 500 && manifest.bodyText.contains("no manifest in-memory"), "\(manifest)")
        let magicsock = try await client.request("GET", "/debug/magicsock")
        #expect(magicsock.status == 404 && magicsock.bodyText.contains("There is no tailnet."), "\(magicsock)")
        for path in ["/debug/prometheus", "/api/v0/processes/list", "/metrics", "/"] {
            let answer = try await client.request("GET", path)
            #expect(answer.status == 404, "\(path): \(answer)")
        }
        // The debug port is the agent's own: not a listening port of the workspace.
        let apiPort = try await agent.port()
        let ports = try await RawHTTPClient(port: apiPort).request("GET", "/api/v0/listening-ports")
        #expect(!ports.bodyText.contains("\"port\":\(debugPort)"), "\(ports)")
        #expect(await eventually { FileManager.default.fileExists(atPath: socket) }, "\(agent.log)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/old.sock"))
        agent.signal(SIGTERM)
        #expect(await agent.exitStatus() == 0, "\(agent.log)")
    }

    /// A debug address that cannot be bound is a warning and the agent serves on; a
    /// `--log-level` given sets the file's level too (the warning, nothing below it).
    @Test func aBusyDebugAddressIsOnlyLogged() async throws {
        let logs = try Self.directory("agent-log-dir")
        defer { try? FileManager.default.removeItem(atPath: logs) }
        let busy = try await LoopbackListener { $0.eventLoop.makeSucceededVoidFuture() }
        defer { Task { await busy.close() } }
        let agent = try AgentDaemon.launch(
            ["--http-address", "127.0.0.1:0", "--log-dir", logs, "--log-level", "warning"],
            environment: ["CODER_AGENT_DEBUG_ADDRESS": "127.0.0.1:\(busy.port)"])
        defer { agent.cleanup() }
        let warning = "warning workspace-agent: cannot listen on 127.0.0.1:\(busy.port) for the debug server"
        var text = ""
        #expect(
            await eventually {
                text = (try? String(contentsOfFile: logs + "/coder-agent.log", encoding: .utf8)) ?? ""
                return text.contains(warning) || agent.reap() != nil
            }, "\(agent.log)")
        #expect(text.contains(warning) && agent.log.contains("cannot listen on 127.0.0.1:\(busy.port)"), "\(text)")
        let levels = Set(text.split(separator: "\n").map { $0.split(separator: " ").dropFirst().first.map(String.init) ?? "" })
        #expect(levels.isSubset(of: ["warning", "error", "critical"]), "\(text)")
        #expect(agent.reap() == nil, "the agent stopped: \(agent.log)")
        agent.signal(SIGTERM)
        #expect(await agent.exitStatus() == 0, "\(agent.log)")
    }
}
