import AgentCore
import AgentProto
import AgentTestSupport
import CAgentSpawn
import ControlPlaneDouble
import Foundation
import HostStats
import Synchronization
import SwiftProtobuf
import Testing

/// Metadata, app health and stats from the agent binary to the control-plane double.
@Suite(.timeLimit(.minutes(4)))
struct WorkspaceAgentReportsTests {
    /// Metadata keys (intervals sent coderd's way, as nanoseconds meaning seconds) are
    /// collected and reported; an HTTP app goes HEALTHY while its server answers and
    /// UNHEALTHY once it is gone; stats start with the interval probe, then report at the
    /// interval the answer asked for, with no invented connection.
    @Test func metadataAppHealthAndStats() async throws {
        let dir = try ScriptsHarness.directory("reports")
        // A real HTTP server the test starts and stops.
        // Below the ephemeral range (the shared helper): python binds it later.
        let port = freeLoopbackPort()
        var manifest = ControlPlaneDouble.defaultManifest
        var counter = Coder_Agent_V2_WorkspaceAgentMetadata.Description()
        counter.key = "counter"
        counter.script = "n=$(( $(cat \(dir)/n 2>/dev/null || echo 0) + 1 )); echo $n > \(dir)/n; echo $n"
        counter.interval = Google_Protobuf_Duration(seconds: 0, nanos: 1)
        // Generous: a run cut by its deadline on a loaded host would report no value.
        counter.timeout = Google_Protobuf_Duration(seconds: 10)
        var failing = Coder_Agent_V2_WorkspaceAgentMetadata.Description()
        failing.key = "failing"
        failing.script = "echo partial; exit 3"
        failing.interval = Google_Protobuf_Duration(seconds: 0, nanos: 1)
        failing.timeout = Google_Protobuf_Duration(seconds: 10)
        manifest.metadata = [counter, failing]
        var app = Coder_Agent_V2_WorkspaceApp()
        app.id = ScriptsHarness.uuidBytes()
        app.slug = "web"
        app.healthcheck.url = "http://127.0.0.1:\(port)/"
        app.healthcheck.interval = Google_Protobuf_Duration(seconds: 1)
        app.healthcheck.threshold = 1
        app.health = .initializing
        manifest.apps = [app]
        let appID = app.id
        let double = ControlPlaneDouble(manifest: manifest)
        double.statsReportInterval.withLock { $0 = .seconds(1) }
        let tokenFile = try ScriptsHarness.tokenFile(double)
        let server = Mutex<pid_t?>(try startHTTPServer(port: port, directory: dir))
        defer { stop(server) }
        // Serving before the agent starts, so that the app's first checks pass.
        #expect(await eventually(timeout: .seconds(60)) { await LoopbackSocket.connect(port: port) != nil })
        try await double.run { url in
            let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile])
            defer { agent.cleanup() }
            func latest(_ key: String) -> Coder_Agent_V2_WorkspaceAgentMetadata.Result? {
                double.recorded.withLock { r in r.metadataBatches.flatMap(\.metadata).last { $0.key == key }?.result }
            }
            #expect(await eventually(timeout: .seconds(60)) { (Int(latest("counter")?.value.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0) >= 3 }, "\(agent.log)")
            #expect(latest("failing")?.value == "partial\n")
            #expect(latest("failing")?.error == "run cmd: exit status 3")

            func health() -> [Coder_Agent_V2_AppHealth] {
                double.recorded.withLock { r in r.appHealthBatches.compactMap { $0.updates.first { $0.id == appID }?.health } }
            }
            #expect(await eventually(timeout: .seconds(60)) { health().last == .healthy }, "\(agent.log)")
            stop(server)
            #expect(await eventually(timeout: .seconds(60)) { health().last == .unhealthy }, "\(agent.log)")
            #expect(Array(health().prefix(2)) == [.healthy, .unhealthy])

            #expect(await eventually(timeout: .seconds(60)) { double.recorded.withLock { $0.statsRequests.count } >= 3 }, "\(agent.log)")
            let stats = double.recorded.withLock { $0.statsRequests }
            #expect(!stats[0].hasStats, "the first call is the interval probe")
            #expect(stats.dropFirst().allSatisfy { $0.hasStats && $0.stats.connectionCount == 0 && $0.stats.connectionMedianLatencyMs == -1 })
            #expect(stats.last?.stats.metrics.contains { $0.name == "agent_scripts_executed_total" || $0.name.hasPrefix("agent_") } == true)
            agent.signal(SIGTERM)
            #expect(await agent.exitStatus() == 0, "\(agent.log)")
        }
    }

    /// `python3 -m http.server` on 127.0.0.1:`port` (spawned directly: Foundation's
    /// `Process.waitUntilExit` spins its run loop).
    func startHTTPServer(port: Int, directory: String) throws -> pid_t {
        var pid: pid_t = 0
        let argv = ["python3", "-m", "http.server", "\(port)", "--bind", "127.0.0.1", "--directory", directory]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        // None of this process's other descriptors (other tests' sockets): the server would
        // hold them open for its whole life.
        agent_spawn_actions_close_from(&actions, 3)
        let rc = withCStrings(argv) { argvPtr in
            posix_spawnp(&pid, "python3", &actions, nil, UnsafeMutablePointer(mutating: argvPtr), environ)
        }
        #expect(rc == 0)
        return pid
    }

    /// Kills and reaps the server, once (a reaped pid may belong to someone else).
    func stop(_ server: borrowing Mutex<pid_t?>) {
        guard
            let pid = server.withLock({ pid in
                defer { pid = nil }; return pid
            })
        else { return }
        kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
    }
    /// `CODER_AGENT_SUBSYSTEM` reaches coderd in UpdateStartup, in its order, blanks skipped.
    @Test func theSubsystemsAreSentInUpdateStartup() async throws {
        let double = ControlPlaneDouble()
        let tokenFile = try ScriptsHarness.tokenFile(double)
        defer { unlink(tokenFile) }
        try await double.run { url in
            let agent = try AgentDaemon.launch(
                ["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile],
                environment: ["CODER_AGENT_SUBSYSTEM": " exectrace, ,envbox"])
            defer { agent.cleanup() }
            #expect(await eventually(timeout: .seconds(90)) { double.recorded.withLock { !$0.startups.isEmpty } }, "\(agent.log)")
            #expect(double.recorded.withLock { $0.startups.first?.subsystems } == [.exectrace, .envbox])
        }
    }

    /// The binary's resource monitor: it asks the control plane for its configuration and
    /// pushes this host's memory and `/` at the configured cadence.
    @Test func resourceUsageIsPushedAtTheConfiguredCadence() async throws {
        let double = ControlPlaneDouble()
        let served = double.serveResourcesMonitoring(
            ControlPlaneDouble.resourcesMonitoringConfiguration(datapoints: 2, intervalSeconds: 1, memory: true, volumes: ["/"]))
        let tokenFile = try ScriptsHarness.tokenFile(double)
        defer { unlink(tokenFile) }
        try await double.run { url in
            let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile])
            defer { agent.cleanup() }
            #expect(await eventually(timeout: .seconds(90)) { served.state.withLock { $0.pushes.count } >= 1 }, "\(agent.log)")
            #expect(served.state.withLock { $0.configurationCalls } >= 1)
            let push = try #require(served.state.withLock { $0.pushes.first })
            #expect(push.datapoints.count == 2)
            #expect(push.datapoints.allSatisfy { $0.hasMemory && $0.memory.total > 0 && $0.volumes.map(\.volume) == ["/"] })
        }
    }
}
