import ArgumentParser
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A stdio MCP server that floods, for `agent-bench chat`'s flood and burst parts: `ping`
/// answers `initialize` and then writes `ping` requests without end; `stderr` writes stderr
/// without end; `long MIB DIR` answers `initialize`, writes MIB MiB of a message without its
/// newline, makes the file DIR/<pid> and waits for stdin's end.
enum BenchFloodMCPServer {
    static let source = #"""
        import json, os, sys

        mode = sys.argv[1]

        def initialize():
            request = json.loads(sys.stdin.readline())
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {
                "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "bench-flood", "version": "1"}}}) + "\n")
            sys.stdout.flush()

        try:
            if mode == "ping":
                initialize()
                pings = "".join(json.dumps({"jsonrpc": "2.0", "id": i, "method": "ping"}) + "\n" for i in range(100))
                while True:
                    sys.stdout.write(pings)
            elif mode == "stderr":
                chunk = ("e" * 127 + "\n") * 512
                while True:
                    sys.stderr.write(chunk)
            elif mode == "long":
                initialize()
                chunk = "x" * (1 << 20)
                sys.stdout.write('{"jsonrpc":"2.0","method":"bench/long","params":"')
                for _ in range(int(sys.argv[2])):
                    sys.stdout.write(chunk)
                sys.stdout.flush()
                open(f"{sys.argv[3]}/{os.getpid()}", "w").close()
                for _ in sys.stdin:
                    pass
        except (BrokenPipeError, OSError):
            pass
        """#

    static func write(into directory: String) throws -> String {
        let path = directory + "/bench_flood_mcp.py"
        try source.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}

extension ChatBench {
    /// Seconds each side of the flood part is measured.
    static let floodSeconds = 5.0

    /// 5. The agent's CPU while two servers flood it with `ping` requests and two with
    /// stderr, against the CPU a bare `read(2)` loop in the bench spends reading one flood of
    /// each kind for as long (what reading them at all costs, as the agent did before).
    func flood() throws {
        let workdir = try directory("flood"), home = try directory("flood-home")
        let script = try BenchFloodMCPServer.write(into: base)
        let python = try self.python
        let baseline = try Self.bareRead(python: python, script: script, mode: "ping") + Self.bareRead(python: python, script: script, mode: "stderr")
        let entries = ["ping", "ping", "stderr", "stderr"].enumerated().map { #""flood\#($0.offset)": {"command": "\#(python)", "args": ["\#(script)", "\#($0.element)"]}"# }
        try (#"{"mcpServers": {"# + entries.joined(separator: ", ") + "}}").write(toFile: workdir + "/.mcp.json", atomically: true, encoding: .utf8)
        let agent = launchStandalone(workdir: workdir, home: home, name: "flood")
        defer { stop(agent.pid) }
        guard ProcessBenchmarks().connectWhenHealthy(port: agent.port) != nil, waitForRows(port: agent.port, count: 4) else {
            throw ValidationError("the agent did not start its flooding servers (logs in \(base))")
        }
        let before = Bench.cpuSeconds(agent.pid)
        usleep(UInt32(Self.floodSeconds * 1_000_000))
        let used = Bench.cpuSeconds(agent.pid) - before
        print("flood: the agent with 2 ping-flooding and 2 stderr-flooding stdio servers for \(Self.floodSeconds) s, against a bare read loop over one of each for as long")
        let ratio = used / max(2 * baseline, 0.001)
        report(
            "agent CPU, 4 flooding servers", value: String(format: "%.2f s", used), baseline: String(format: "%.2f s (x2)", baseline),
            ratio: ratio, goal: "<= 0.10x reading the floods", met: ratio <= 0.10)
    }

    /// CPU seconds a bare read loop spends on `mode`'s flood for ``floodSeconds``.
    static func bareRead(python: String, script: String, mode: String) throws -> Double {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script, mode]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        if mode == "stderr" {
            process.standardError = output
            process.standardOutput = FileHandle.nullDevice
        } else {
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
        }
        try process.run()
        defer {
            // SIGKILL: the bench's children inherit its blocked SIGTERM.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        input.fileHandleForWriting.write(Data(#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#.utf8 + [0x0a]))
        let fd = output.fileHandleForReading.fileDescriptor
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        func threadCPU() -> Double {
            var spec = timespec()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
            return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
        }
        let start = Date(), cpu = threadCPU()
        while Date().timeIntervalSince(start) < floodSeconds {
            if read(fd, &buffer, buffer.count) <= 0 { break }
        }
        return threadCPU() - cpu
    }

    /// Whether `count` server rows have a pid (their process runs) within 60 s.
    func waitForRows(port: Int, count: Int) -> Bool {
        for _ in 0..<Self.connectAttempts {
            if let rows = serverRows(port: port), rows.count == count, rows.allSatisfy({ ($0["pid"] as? Int) != nil || !($0["last_error"] as? String ?? "").isEmpty }) {
                return true
            }
            usleep(100_000)
        }
        return false
    }

    func serverRows(port: Int) -> [[String: Any]]? {
        guard let (status, body) = BlockingHTTP(port: port)?.request("GET", "/api/v0/mcp/servers"), status == 200 else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])?["servers"] as? [[String: Any]]
    }

    /// 6. The agent's memory when sixteen servers each send a 15 MiB message without its
    /// newline (240 MiB in all), against what they sent; and what is left over idle after
    /// they are removed, against that peak.
    func burst() throws {
        let servers = 16, mib = 15
        let workdir = try directory("burst"), home = try directory("burst-home"), markers = try directory("burst-markers")
        let script = try BenchFloodMCPServer.write(into: base)
        let python = try self.python
        try #"{"mcpServers": {}}"#.write(toFile: workdir + "/.mcp.json", atomically: true, encoding: .utf8)
        let agent = launchStandalone(workdir: workdir, home: home, name: "burst")
        defer { stop(agent.pid) }
        guard ProcessBenchmarks().connectWhenHealthy(port: agent.port) != nil, waitForRows(port: agent.port, count: 0) else {
            throw ValidationError("the agent did not start (logs in \(base))")
        }
        usleep(4_000_000)
        let idle = Bench.rss(agent.pid)
        let entries = (0..<servers).map { #""long\#($0)": {"command": "\#(python)", "args": ["\#(script)", "long", "\#(mib)", "\#(markers)"]}"# }
        try (#"{"mcpServers": {"# + entries.joined(separator: ", ") + "}}").write(toFile: workdir + "/.mcp.json", atomically: true, encoding: .utf8)
        // Each server either sent its whole message (a marker) or had it refused.
        var settled = false
        for _ in 0..<1200 where !settled {
            let written = (try? FileManager.default.contentsOfDirectory(atPath: markers).count) ?? 0
            let refused = serverRows(port: agent.port)?.count { ($0["last_error"] as? String ?? "").contains("buffers are full") } ?? 0
            settled = written + refused >= servers
            if !settled { usleep(100_000) }
        }
        guard settled else { throw ValidationError("the servers did not send their messages within 120 s (logs in \(base))") }
        let peak = Bench.rss(agent.pid, field: "VmHWM")
        try #"{"mcpServers": {}}"#.write(toFile: workdir + "/.mcp.json", atomically: true, encoding: .utf8)
        guard waitForRows(port: agent.port, count: 0) else { throw ValidationError("the servers were not removed (logs in \(base))") }
        // The trims after a burst come 0.5 s, 2 s, 8 s and 32 s after it.
        usleep(34_000_000)
        let after = Bench.rss(agent.pid)
        let sent = servers * mib << 20
        print("burst: \(servers) stdio servers each sending a \(mib) MiB message without its newline, then removed; idle \(Bench.mib(idle))")
        let held = Double(peak - idle) / Double(sent)
        report(
            "agent peak over idle", value: Bench.mib(peak - idle), baseline: Bench.mib(sent) + " sent",
            ratio: held, goal: "<= 0.50x what was sent", met: held <= 0.5)
        let kept = Double(after - idle) / Double(max(peak - idle, 1))
        report(
            "  left over idle 34 s after removal", value: Bench.mib(after - idle), baseline: Bench.mib(peak - idle) + " peak",
            ratio: kept, goal: "<= 0.50x the peak", met: kept <= 0.5)
    }
}
