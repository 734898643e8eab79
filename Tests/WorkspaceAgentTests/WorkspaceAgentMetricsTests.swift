import AgentTestSupport
import CAgentSpawn
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `/metrics` on the API and on the Prometheus listener, in a format a real
/// Prometheus parser (Debian's python3-prometheus-client) reads, with counters that move.
/// A generous time limit, only against hangs.
@Suite(.timeLimit(.minutes(10))) struct WorkspaceAgentMetricsTests {
    @Test func metricsParseAndMove() async throws {
        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--prometheus-address", "127.0.0.1:0"])
        defer { agent.cleanup() }
        let api = RawHTTPClient(port: try await agent.port())
        var metricsPort: Int?
        _ = await eventually {
            if let range = agent.log.range(of: #"metrics_address=127\.0\.0\.1:(\d+)"#, options: .regularExpression) {
                metricsPort = Int(agent.log[range].split(separator: ":").last!)
            }
            return metricsPort != nil
        }
        let listener = RawHTTPClient(port: try #require(metricsPort))
        // Both listeners were given port 0: the ports the kernel chose are the agent's own,
        // left out of listening-ports.
        let ports = try await api.request("GET", "/api/v0/listening-ports")
        let listed = (jsonObject(ports.body)?["ports"] as? [[String: Any]] ?? []).compactMap { ($0["port"] as? NSNumber)?.intValue }
        #expect(ports.status == 200)
        #expect(!listed.contains(try #require(metricsPort)) && !listed.contains(api.port), "\(ports.bodyText)")

        let before = try await parse(try await listener.request("GET", "/metrics").bodyText)
        let started = try await api.request("POST", "/api/v0/processes/start", json: #"{"command":"echo metrics"}"#)
        let id = try #require(jsonObject(started.body)?["id"] as? String)
        _ = try await api.request("GET", "/api/v0/processes/\(id)/output?wait=true")
        let afterResponse = try await api.request("GET", "/metrics")
        #expect(afterResponse.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
        var after = try await parse(afterResponse.bodyText)
        // The exit is counted just after it is visible to `wait`: scraped until it is.
        #expect(
            try await eventually {
                after = try await parse(try await api.request("GET", "/metrics").bodyText)
                return (after["agent_processes_exited"] ?? 0) >= 1
            })

        #expect((after["agent_processes_started"] ?? 0) >= (before["agent_processes_started"] ?? 0) + 1)
        #expect((after["agent_processes_exited"] ?? 0) >= 1)
        #expect((after["agent_process_output_bytes"] ?? 0) >= 8)
        #expect(after["agent_upward_items_queued"] != nil)
        #expect(after["http_server_request_duration_seconds"] != nil)
    }

    /// Every family has its own HELP line; the standard process metrics and
    /// the build info are there; durations are in `_seconds`; a WebSocket route is in the
    /// request histogram once its session ends.
    @Test func everyFamilyIsDescribedAndTheAgentsOwnMetricsAreThere() async throws {
        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0"])
        defer { agent.cleanup() }
        let port = try await agent.port()
        let api = RawHTTPClient(port: port)
        let started = try await api.request("POST", "/api/v0/processes/start", json: #"{"command":"sleep 30"}"#)
        let id = try #require(jsonObject(started.body)?["id"] as? String)
        let streamRoute = #"http_route="/api/v0/processes/{id}/stream",http_request_method="GET",http_response_status_code="101""#
        #expect(!(try await api.request("GET", "/metrics").bodyText.contains(streamRoute)))
        // The process runs on: the session ends when the client closes it.
        try await TestWebSocket.withConnection(port: port, path: "/api/v0/processes/\(id)/stream") { socket in
            try? await socket.close()
        }
        var text = ""
        #expect(
            await eventually {
                text = (try? await api.request("GET", "/metrics").bodyText) ?? ""
                return text.contains(streamRoute)
            }, "\(text)")

        let families = Set(
            text.split(separator: "\n").compactMap { line -> Substring? in
                line.hasPrefix("# TYPE ") ? line.dropFirst(7).split(separator: " ").first : nil
            })
        #expect(families.count > 10)
        for family in families {
            let help = text.split(separator: "\n").first { $0.hasPrefix("# HELP \(family) ") }
            #expect(help != nil && help?.contains("no description yet") == false, "\(family)")
        }
        for family in [
            "process_cpu_seconds_total", "process_resident_memory_bytes", "process_virtual_memory_bytes", "process_open_fds",
            "process_max_fds", "process_start_time_seconds", "http_server_request_duration_seconds",
        ] {
            #expect(families.contains(Substring(family)), "\(family)")
        }
        #expect(!families.contains("http_server_request_duration"))
        let parsed = try await parse(text)
        #expect((parsed["process_resident_memory_bytes"] ?? 0) > 1_000_000)
        #expect((parsed["process_open_fds"] ?? 0) >= 3)
        #expect((parsed["process_start_time_seconds"] ?? 0) > Date().timeIntervalSince1970 - 3600)
        #expect(text.range(of: #"workspace_agent_build_info\{version="\d+\.\d+\.\d+",commit="[^"]+"\} 1"#, options: .regularExpression) != nil)
    }

    /// The Prometheus listener is optional: a busy `--prometheus-address` is logged as a
    /// warning and the agent serves on, `/metrics` on the API included.
    @Test func aBusyPrometheusPortIsAWarningNotAnExit() async throws {
        let occupied = try #require(ListeningLoopbackSocket())
        defer { occupied.close() }
        let agent = try AgentDaemon.launch([
            "--http-address", "127.0.0.1:0", "--prometheus-address", "127.0.0.1:\(occupied.port)", "--log-format", "json",
        ])
        defer { agent.cleanup() }
        let api = RawHTTPClient(port: try await agent.port())
        // The warning is logged once the bind failed; the agent is still running after it.
        var warning: Substring?
        #expect(
            await eventually(timeout: .seconds(30)) {
                warning = agent.log.split(separator: "\n").first { $0.contains("Prometheus") && $0.contains("127.0.0.1:\(occupied.port)") }
                return warning != nil || agent.reap() != nil
            }, "\(agent.log)")
        let line = try #require(warning, "\(agent.log)")
        #expect(line.contains(#""level":"warning""#), "\(line)")
        #expect(line.contains("address already in use (errno 98)"), "\(line)")
        #expect(agent.reap() == nil, "the agent exited: \(agent.log)")
        #expect(try await api.request("GET", "/healthz").status == 200)
        let metrics = try await api.request("GET", "/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.bodyText.contains("# HELP "))
        agent.signal(SIGTERM)
        #expect(await agent.exitStatus() == 0, "\(agent.log)")
    }

    /// Parses Prometheus text with the real parser; returns each family's summed samples
    /// (counters without `_total`, histograms by their `_count`).
    func parse(_ text: String) async throws -> [String: Double] {
        let directory = NSTemporaryDirectory() + "metrics-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let input = directory + "/metrics.txt"
        let output = directory + "/parsed.txt"
        try TestFile.write(input, text, atomically: true)
        let script = """
            import sys
            from prometheus_client.parser import text_string_to_metric_families
            for family in text_string_to_metric_families(open(sys.argv[1]).read()):
                total = sum(s.value for s in family.samples if s.name in (family.name, family.name + "_total", family.name + "_count"))
                print(family.name, total)
            """
        let status = try await run(["/usr/bin/python3", "-c", script, input], output: output)
        let parsed = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        try #require(status == 0, "the Prometheus parser refused the output:\n\(parsed)")
        var families: [String: Double] = [:]
        for line in parsed.split(separator: "\n") {
            let parts = line.split(separator: " ")
            if parts.count == 2, let value = Double(parts[1]) { families[String(parts[0])] = value }
        }
        return families
    }

    /// Runs `argv` to completion with stdout and stderr in `output`; its exit status.
    func run(_ argv: [String], output: String) async throws -> Int32 {
        let fd = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        try #require(fd >= 0)
        defer { close(fd) }
        let pointers = argv.map { strdup($0) } + [nil]
        defer { for p in pointers { free(p) } }
        let environment: [UnsafeMutablePointer<CChar>?] = [strdup("PATH=/usr/bin:/bin"), nil]
        defer { for p in environment { free(p) } }
        var step: Int32 = 0
        var err: Int32 = 0
        let pid = pointers.withUnsafeBufferPointer { argvPtr in
            environment.withUnsafeBufferPointer { envPtr in
                argv[0].withCString { path in
                    var options = agent_spawn_options(
                        path: path, argv: argvPtr.baseAddress, envp: envPtr.baseAddress, cwd: nil, output_fd: fd,
                        oom_score_adj: AGENT_SPAWN_KEEP, nice_value: AGENT_SPAWN_KEEP, nofile_soft: -1, parent_death_signal: 0, error_fd: -1, new_session: 0, input_fd: -1, controlling_terminal: 0)
                    return agent_spawn(&options, &step, &err)
                }
            }
        }
        try #require(pid > 0, "spawn failed: step \(step) errno \(err)")
        // Waited for on a thread of its own: a blocking waitpid would hold a cooperative thread.
        let status = await onThread { () -> Int32 in
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            return status
        }
        return status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }
}

/// A loopback TCP socket bound to a port the kernel picked and listening on it, so that
/// nothing else can bind that port until it is closed.
final class ListeningLoopbackSocket: Sendable {
    let fd: Int32
    let port: Int

    init?() {
        guard let (fd, port) = RawLoopbackListener.make(backlog: 8) else { return nil }
        self.fd = fd
        self.port = port
    }

    func close() { Glibc.close(fd) }
}
