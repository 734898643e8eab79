import AgentCore
import ArgumentParser
import Foundation
import MCPEngine

#if canImport(Glibc)
import Glibc
#endif

/// `agent-bench chat`: the chat extensions, each figure against a baseline in the same run:
/// `call-tool` through the agent against the same call made directly to the same stdio MCP
/// server by a client in the bench; an `AGENTS.md` write until the control-plane double has
/// the push carrying it, against the watcher's debounce; a full resolve of 500 resources, and
/// of 1 000 skills of 63 KiB cold and after one changed, against merely reading the same
/// files; the agent's RSS with 5 idle stdio servers connected against the agent without any;
/// its CPU under flooding servers against a bare read loop; and its memory under a burst of
/// long messages against what the servers sent.
struct ChatBenchmarks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chat",
        abstract: "Chat extensions: call-tool overhead, AGENTS.md write to push, a 500-resource resolve, 1000 large skills, RSS with 5 MCP servers, floods, a burst."
    )

    @Option(help: "Path of the workspace-agent binary (default: next to agent-bench).")
    var agent: String?

    @Option(help: "call-tool, push, resolve, skills, rss, flood or burst: run only that part (default: every part).")
    var only: String?

    @Option(help: "call-tool calls per side after the warm-up (median and p90 over all).")
    var calls = 300

    @Option(help: "AGENTS.md writes timed to their push.")
    var pushes = 10

    @Option(help: "Resolves (and baseline reads) per side, alternating; the median is reported.")
    var resolves = 21

    @Option(help: "Cold resolves of the 1000 large skills (each with a resolver of its own); the median is reported.")
    var skillResolves = 5

    @Option(help: "One-SKILL.md changes, each followed by a timed resolve, among the 1000 large skills.")
    var skillChanges = 21

    @Option(help: "A stdio MCP server script run with python3 for the call-tool part (default: agent-bench's own minimal echo server); it must have an `echo` tool taking `text`, as Tests/Chat/MCPEngineTests/Servers/mcp_test_server.py does.")
    var server: String?

    static let parts = ["call-tool", "push", "resolve", "skills", "rss", "flood", "burst"]

    func validate() throws {
        if let only, !Self.parts.contains(only) {
            throw ValidationError("--only must be one of \(Self.parts.joined(separator: ", "))")
        }
        guard (1...10_000).contains(calls), (1...100).contains(pushes), (1...1000).contains(resolves),
            (1...100).contains(skillResolves), (1...1000).contains(skillChanges)
        else {
            throw ValidationError("--calls 1...10000, --pushes 1...100, --resolves 1...1000, --skill-resolves 1...100, --skill-changes 1...1000")
        }
    }

    func run() async throws {
        let binary = try Bench.agentBinary(agent)
        let base = NSTemporaryDirectory() + "agent-bench-chat-\(getpid())"
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        let bench = ChatBench(binary: binary, base: URL(fileURLWithPath: base).resolvingSymlinksInPath().path)
        print("agent-bench chat: \(Bench.relative(binary))")
        func wanted(_ part: String) -> Bool { only == nil || only == part }
        if wanted("call-tool") { try await bench.callTool(calls: calls, script: server) }
        if wanted("push") { try await bench.push(count: pushes) }
        if wanted("resolve") { try bench.resolve(runs: resolves) }
        if wanted("skills") { try bench.largeSkills(coldRuns: skillResolves, changes: skillChanges) }
        if wanted("rss") { try bench.rss() }
        if wanted("flood") { try bench.flood() }
        if wanted("burst") { try bench.burst() }
    }
}

/// The parts of `agent-bench chat`, sharing the agent binary and a scratch directory.
struct ChatBench {
    let binary: String
    /// Canonical (the resolver and the agent see canonical paths).
    let base: String

    /// Calls timed per round; the sides alternate by round (this host drifts between rounds).
    static let callsPerRound = 60
    /// Calls per side before any is timed.
    static let warmUpCalls = 30
    /// How long the agent may take to connect its MCP servers.
    static let connectAttempts = 600

    var python: String {
        get throws {
            guard let python = Bench.onPath("python3") else { throw ValidationError("python3 not found on PATH") }
            return python
        }
    }

    /// This process's environment with `HOME` set to a directory of the bench's (the agent's
    /// built-in scan roots stay empty).
    func environment(home: String) -> [String: String] {
        var env = ProcessInfo.processInfo.environment
        env["HOME"] = home
        env["PYTHONUNBUFFERED"] = "1"
        return env.filter { !$0.key.hasPrefix("CODER_") }
    }

    /// A fresh directory under the scratch directory.
    func directory(_ name: String) throws -> String {
        let path = base + "/" + name
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Starts the agent standalone on a free port in `workdir`; the caller stops it.
    func launchStandalone(workdir: String, home: String, name: String) -> (pid: pid_t, port: Int) {
        let port = Bench.freePort()
        let pid = Bench.spawn(
            [
                binary, "--http-address", "127.0.0.1:\(port)", "--state-dir", base + "/state-\(name)", "--log-level", "warning",
                "--prometheus-address", "", "--socket-server-enabled", "false", "--directory", workdir,
            ],
            stdoutPath: base + "/agent-\(name).log", environment: environment(home: home))
        return (pid, port)
    }

    func stop(_ pid: pid_t) {
        kill(pid, SIGTERM)
        _ = Bench.wait(pid)
    }

    /// `{"mcpServers": …}` declaring `count` stdio servers running `script` with python3.
    func mcpConfig(servers count: Int, script: String) throws -> String {
        let python = try self.python
        let entries = (0..<count).map { #""bench\#($0)": {"command": "\#(python)", "args": ["\#(script)"]}"# }
        return #"{"mcpServers": {"# + entries.joined(separator: ", ") + "}}"
    }

    /// The `/api/v0/mcp/servers` rows once `count` are connected (polled, at most 60 s).
    func waitForConnected(port: Int, count: Int) -> [[String: Any]]? {
        for _ in 0..<Self.connectAttempts {
            if let (status, body) = BlockingHTTP(port: port)?.request("GET", "/api/v0/mcp/servers"), status == 200,
                let rows = (try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])?["servers"] as? [[String: Any]],
                rows.count == count, rows.allSatisfy({ $0["state"] as? String == "connected" })
            {
                return rows
            }
            usleep(100_000)
        }
        return nil
    }

    /// 1. `POST /api/v0/mcp/call-tool` through the agent against `tools/call` from an
    /// ``MCPClientSession`` in the bench to another instance of the same server program.
    func callTool(calls: Int, script: String?) async throws {
        let workdir = try directory("call-tool"), home = try directory("call-tool-home")
        let serverScript = try script ?? BenchEchoMCPServer.write(into: base)
        try mcpConfig(servers: 1, script: serverScript).write(toFile: workdir + "/.mcp.json", atomically: true, encoding: .utf8)
        let (pid, port) = launchStandalone(workdir: workdir, home: home, name: "call-tool")
        defer { stop(pid) }
        guard ProcessBenchmarks().connectWhenHealthy(port: port) != nil, waitForConnected(port: port, count: 1) != nil else {
            throw ValidationError("the agent did not connect its MCP server (log: \(base)/agent-call-tool.log)")
        }
        let python = try self.python
        let command = MCPStdioCommand(
            serverName: "bench0", executable: python, arguments: [python, serverScript], environment: environment(home: home), directory: workdir)
        let session: MCPClientSession
        do {
            session = try await MCPClientSession.connect(command, clientVersion: "agent-bench", log: { _, _ in })
        } catch {
            throw ValidationError("the bench's own MCP session failed: \(error)")
        }
        guard let client = BlockingHTTP(port: port) else { throw ValidationError("no connection to the agent") }
        let body = #"{"tool_name":"bench0__echo","arguments":{"text":"hello"}}"#
        let arguments: JSONValue = .object([("text", .string("hello"))])
        func viaAgent() throws -> Double {
            let start = Bench.now()
            guard let (status, answer) = client.request("POST", "/api/v0/mcp/call-tool", body: body), status == 200 else {
                throw ValidationError("call-tool through the agent failed")
            }
            let elapsed = Double(Bench.now() - start)
            guard String(decoding: answer, as: UTF8.self).contains(#""text":"hello""#) else {
                throw ValidationError("call-tool answered \(String(decoding: answer, as: UTF8.self))")
            }
            return elapsed
        }
        func direct() async throws -> Double {
            let start = Bench.now()
            let result: MCPToolResult
            do {
                result = try await session.callTool("echo", arguments: arguments)
            } catch {
                throw ValidationError("the direct call failed: \(error)")
            }
            let elapsed = Double(Bench.now() - start)
            guard result.content.first?.text == "hello" else { throw ValidationError("the direct call answered \(result)") }
            return elapsed
        }
        func healthz() -> Double {
            let start = Bench.now()
            _ = client.request("GET", "/healthz")
            return Double(Bench.now() - start)
        }
        for _ in 0..<Self.warmUpCalls {
            _ = try viaAgent()
            _ = try await direct()
            _ = healthz()
        }
        var agentTimes: [Double] = [], directTimes: [Double] = [], healthTimes: [Double] = []
        while agentTimes.count < calls {
            let round = min(Self.callsPerRound, calls - agentTimes.count)
            for _ in 0..<round { agentTimes.append(try viaAgent()) }
            for _ in 0..<round { directTimes.append(try await direct()) }
            for _ in 0..<round { healthTimes.append(healthz()) }
        }
        await session.close()

        let (agentMedian, directMedian) = (Bench.median(agentTimes), Bench.median(directTimes))
        let (agentP90, directP90) = (Bench.percentile(agentTimes, 0.9), Bench.percentile(directTimes, 0.9))
        let added = agentMedian - directMedian
        let health = Bench.median(healthTimes)
        print("call-tool: \(calls) sequential calls per side after \(Self.warmUpCalls) of warm-up, \(Self.callsPerRound) per round alternating; server: \(script.map(Bench.relative) ?? "agent-bench's minimal echo server (python3)")")
        report(
            "call-tool via the agent (median)", value: Bench.format(agentMedian), baseline: Bench.format(directMedian),
            ratio: agentMedian / directMedian, goal: "(information: baseline the bench's own MCP client)", met: true)
        report(
            "call-tool via the agent (p90)", value: Bench.format(agentP90), baseline: Bench.format(directP90),
            ratio: agentP90 / directP90, goal: "(information)", met: true)
        report(
            "  added by the agent (median)", value: Bench.format(added), baseline: Bench.format(1e6),
            ratio: added / 1e6, goal: "<= 1 ms added at the median", met: added <= 1e6)
        report(
            "  added by the agent (p90)", value: Bench.format(agentP90 - directP90), baseline: Bench.format(1e6),
            ratio: (agentP90 - directP90) / 1e6, goal: "(information)", met: true)
        report(
            "  of which GET /healthz round trip", value: Bench.format(health), baseline: Bench.format(added),
            ratio: health / max(added, 1), goal: "(information: the HTTP exchange alone)", met: true)
    }

    /// 4. The agent's RSS with 5 idle stdio servers connected, against a second agent without
    /// any, both running at once and read at the same moment (the servers' own memory is in
    /// their processes, not counted).
    func rss() throws {
        let servers = 5
        let bare = try directory("rss-bare"), busy = try directory("rss-servers"), home = try directory("rss-home")
        let script = try BenchEchoMCPServer.write(into: base)
        try mcpConfig(servers: servers, script: script).write(toFile: busy + "/.mcp.json", atomically: true, encoding: .utf8)
        let without = launchStandalone(workdir: bare, home: home, name: "rss-bare")
        defer { stop(without.pid) }
        let with = launchStandalone(workdir: busy, home: home, name: "rss-servers")
        defer { stop(with.pid) }
        guard ProcessBenchmarks().connectWhenHealthy(port: without.port) != nil,
            ProcessBenchmarks().connectWhenHealthy(port: with.port) != nil,
            let rows = waitForConnected(port: with.port, count: servers),
            waitForConnected(port: without.port, count: 0) != nil
        else { throw ValidationError("the agents did not start, or the servers did not connect (logs in \(base))") }
        // Both past start-up (the agent releases its start-up pages 2 s after start) and idle.
        usleep(4_000_000)
        let (bareRSS, busyRSS) = (Bench.rss(without.pid), Bench.rss(with.pid))
        let (bareAnon, busyAnon) = (Bench.rss(without.pid, field: "RssAnon"), Bench.rss(with.pid, field: "RssAnon"))
        let serverRSS = rows.compactMap { $0["pid"] as? Int }.reduce(0) { $0 + Bench.rss(pid_t($1)) }
        print("rss: two agents at once, one with \(servers) idle stdio servers (agent-bench's echo server) connected; read 4 s after")
        report(
            "agent RSS, 5 idle stdio servers", value: Bench.mib(busyRSS), baseline: Bench.mib(bareRSS),
            ratio: Double(busyRSS) / Double(max(bareRSS, 1)), goal: "reported (baseline: the agent without servers)", met: true)
        report(
            "  added by the 5 servers", value: Bench.mib(busyRSS - bareRSS), baseline: Bench.mib(bareRSS),
            ratio: Double(busyRSS - bareRSS) / Double(max(bareRSS, 1)), goal: "reported", met: true)
        report(
            "  private (RssAnon) added", value: Bench.mib(busyAnon - bareAnon), baseline: Bench.mib(bareAnon),
            ratio: Double(busyAnon - bareAnon) / Double(max(bareAnon, 1)), goal: "(information)", met: true)
        report(
            "  the servers' own RSS (not the agent's)", value: Bench.mib(serverRSS), baseline: Bench.mib(busyRSS),
            ratio: Double(serverRSS) / Double(max(busyRSS, 1)), goal: "(information)", met: true)
    }
}
