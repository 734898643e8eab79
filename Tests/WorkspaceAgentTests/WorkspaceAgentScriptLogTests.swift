import AgentProto
import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Synchronization
import SwiftProtobuf
import Testing

/// Startup logs upward: volume, outages, the control plane's log limit and agent restarts.
@Suite(.timeLimit(.minutes(5)))
struct WorkspaceAgentScriptLogTests {
    /// 100,000 lines arrive complete and in order while the HTTP API keeps answering.
    @Test func hundredThousandLinesArriveInOrder() async throws {
        var manifest = ControlPlaneDouble.defaultManifest
        let script = ScriptsHarness.script("seq 1 100000")
        manifest.scripts = [script]
        let double = ControlPlaneDouble(manifest: manifest)
        let tokenFile = try ScriptsHarness.tokenFile(double)
        try await double.run { url in
            let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile])
            defer { agent.cleanup() }
            let client = RawHTTPClient(port: try await agent.port())
            var healthy = 0
            let arrived = await eventually(timeout: .seconds(120)) {
                if (try? await client.request("GET", "/healthz").status) == 200 { healthy += 1 }
                return ScriptsHarness.lines(double, source: script.logSourceID).count >= 100_000
            }
            #expect(arrived, "\(agent.log)")
            #expect(healthy > 0)
            let outputs = ScriptsHarness.outputs(double, source: script.logSourceID)
            #expect(Self.same(outputs, (1...100_000).map(String.init)))
            #expect(await eventually(timeout: .seconds(30)) { ScriptsHarness.lifecycle(double).last == .ready })
            agent.signal(SIGTERM)
            #expect(await agent.exitStatus() == 0, "\(agent.log)")
        }
    }

    /// Batches the control plane answers with an error (its database down for a moment) are
    /// sent again on the same connection: every line arrives, once and in order.
    @Test func refusedBatchesAreSentAgainOnTheSameConnection() async throws {
        var manifest = ControlPlaneDouble.defaultManifest
        let script = ScriptsHarness.script("seq 1 2000")
        manifest.scripts = [script]
        let double = ControlPlaneDouble(manifest: manifest)
        double.failingLogBatches.withLock { $0 = 2 }
        let tokenFile = try ScriptsHarness.tokenFile(double)
        try await double.run { url in
            let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile])
            defer { agent.cleanup() }
            #expect(await eventually(timeout: .seconds(60)) { ScriptsHarness.lines(double, source: script.logSourceID).count >= 2000 }, "\(agent.log)")
            #expect(double.failingLogBatches.withLock { $0 } == 0, "the refusals were met")
            #expect(Self.same(ScriptsHarness.outputs(double, source: script.logSourceID), (1...2000).map(String.init)))
            #expect(double.recorded.withLock { $0.connections } == 1, "on the same connection")
            agent.signal(SIGTERM)
            #expect(await agent.exitStatus() == 0, "\(agent.log)")
        }
    }

    /// The control plane goes away while a script is writing: lines and the run's report made
    /// during the outage are kept and arrive, in order and once each, from the next control
    /// plane on the same address; the script is not run again.
    @Test func linesWrittenDuringAnOutageArriveOnceAfterReconnect() async throws {
        let dir = try ScriptsHarness.directory("scripts-outage")
        var manifest = ControlPlaneDouble.defaultManifest
        let script = ScriptsHarness.script(
            """
            seq 1 10000
            while [ ! -e \(dir)/go ]; do sleep 0.05; done
            seq 10001 20000
            echo run >> \(dir)/runs
            """)
        manifest.scripts = [script]
        let first = ControlPlaneDouble(manifest: manifest)
        let second = ControlPlaneDouble(manifest: manifest)
        let tokenFile = try ScriptsHarness.tokenFile(first)
        let port = Mutex(0)
        let agentBox = Mutex<AgentDaemon?>(nil)
        defer { agentBox.withLock { $0?.cleanup() } }
        // Not a kernel-chosen port: the second control plane binds it again after the outage.
        try await first.run(port: freeLoopbackPort()) { url in
            port.withLock { $0 = URLComponents(string: url)?.port ?? 0 }
            let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile])
            agentBox.withLock { $0 = agent }
            #expect(await eventually(timeout: .seconds(60)) { ScriptsHarness.lines(first, source: script.logSourceID).count == 10_000 }, "\(agent.log)")
        }
        // The first control plane is gone; the second half is written meanwhile.
        try TestFile.write(dir + "/go", [UInt8]())
        let agent = try #require(agentBox.withLock { $0 })
        #expect(await eventually(timeout: .seconds(60)) { FileManager.default.fileExists(atPath: dir + "/runs") })
        try await second.run(port: port.withLock { $0 }) { _ in
            #expect(await eventually(timeout: .seconds(90)) { ScriptsHarness.timings(second, script: script.id).count == 1 }, "\(agent.log)")
            #expect(await eventually(timeout: .seconds(60)) { ScriptsHarness.lines(second, source: script.logSourceID).count >= 10_000 }, "\(agent.log)")
            let all = ScriptsHarness.outputs(first, source: script.logSourceID) + ScriptsHarness.outputs(second, source: script.logSourceID)
            #expect(Self.same(all, (1...20_000).map(String.init)))
            #expect(ScriptsHarness.timings(first, script: script.id).isEmpty)
            // READY goes upward apart from the logs and timings: waited for.
            #expect(await eventually(timeout: .seconds(60)) { ScriptsHarness.lifecycle(second).last == .ready })
            let runs = try String(contentsOfFile: dir + "/runs", encoding: .utf8)
            #expect(runs == "run\n")
            agent.signal(SIGTERM)
            #expect(await agent.exitStatus() == 0, "\(agent.log)")
        }
    }

    /// `log_limit_exceeded`: the agent stops sending lines (one batch, then none), the script
    /// runs to its end and its log file holds every line; its report still goes up.
    @Test func logLimitExceededStopsUploadsNotScripts() async throws {
        let dir = try ScriptsHarness.directory("scripts-limit")
        var manifest = ControlPlaneDouble.defaultManifest
        let script = ScriptsHarness.script(
            """
            echo first
            while [ ! -e \(dir)/go ]; do sleep 0.05; done
            seq 1 3000
            """, logPath: dir + "/limit.log")
        manifest.scripts = [script]
        let double = ControlPlaneDouble(manifest: manifest)
        double.logLimitExceeded.withLock { $0 = true }
        let tokenFile = try ScriptsHarness.tokenFile(double)
        try await double.run { url in
            let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile])
            defer { agent.cleanup() }
            #expect(await eventually(timeout: .seconds(60)) { ScriptsHarness.outputs(double, source: script.logSourceID) == ["first"] }, "\(agent.log)")
            try TestFile.write(dir + "/go", [UInt8]())
            #expect(await eventually(timeout: .seconds(60)) { ScriptsHarness.timings(double, script: script.id).count == 1 }, "\(agent.log)")
            #expect(ScriptsHarness.timings(double, script: script.id).first?.status == .ok)
            #expect(ScriptsHarness.outputs(double, source: script.logSourceID) == ["first"])
            let file = try String(contentsOfFile: dir + "/limit.log", encoding: .utf8)
            #expect(Self.same([file], ["first\n" + (1...3000).map { "\($0)\n" }.joined()]))
            agent.signal(SIGTERM)
            #expect(await agent.exitStatus() == 0, "\(agent.log)")
            #expect(ScriptsHarness.outputs(double, source: script.logSourceID) == ["first"])
        }
    }

    /// Lines and a report made while the control plane refuses the agent are kept on disk
    /// across an agent restart and sent by the next agent process, each once, before the
    /// new run's.
    @Test func journalSurvivesAnAgentRestartWithoutDuplicates() async throws {
        let dir = try ScriptsHarness.directory("scripts-restart")
        let state = try ScriptsHarness.directory("scripts-restart-state")
        var manifest = ControlPlaneDouble.defaultManifest
        let script = ScriptsHarness.script(
            """
            while [ ! -e \(dir)/go ]; do sleep 0.05; done
            n=$(cat \(dir)/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > \(dir)/n
            for i in $(seq 1 500); do echo "run$n $i"; done
            """)
        manifest.scripts = [script]
        let double = ControlPlaneDouble(manifest: manifest)
        let tokenFile = try ScriptsHarness.tokenFile(double)
        try await double.run { url in
            let first = try AgentDaemon.launch(
                ["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile], environment: ["XDG_STATE_HOME": state])
            defer { first.cleanup() }
            let client = RawHTTPClient(port: try await first.port())
            // The first agent has its manifest (the script waits), then loses the control
            // plane for good: what the run makes stays in its journal.
            #expect(await eventually(timeout: .seconds(60)) { ScriptsHarness.lifecycle(double).contains(.starting) }, "\(first.log)")
            double.refuseWith.withLock { $0 = 503 }
            await double.dropConnections()
            try TestFile.write(dir + "/go", [UInt8]())
            #expect(
                await eventually(timeout: .seconds(60)) {
                    let status = try? await client.request("GET", "/api/v0/scripts")
                    let scripts = status.flatMap { jsonObject($0.body)?["scripts"] as? [[String: Any]] }
                    return (scripts?.first?["runs"] as? [Any])?.count == 1
                }, "\(first.log)")
            first.signal(SIGTERM)
            #expect(await first.exitStatus() == 0, "\(first.log)")
            #expect(ScriptsHarness.lines(double, source: script.logSourceID).isEmpty)
            #expect(ScriptsHarness.timings(double, script: script.id).isEmpty)

            double.refuseWith.withLock { $0 = nil }
            let second = try AgentDaemon.launch(
                ["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile], environment: ["XDG_STATE_HOME": state])
            defer { second.cleanup() }
            #expect(
                await eventually(timeout: .seconds(60)) {
                    ScriptsHarness.lines(double, source: script.logSourceID).count >= 1000 && ScriptsHarness.timings(double, script: script.id).count == 2
                }, "\(second.log)")
            let expected = (1...500).map { "run1 \($0)" } + (1...500).map { "run2 \($0)" }
            #expect(Self.same(ScriptsHarness.outputs(double, source: script.logSourceID), expected))
            second.signal(SIGTERM)
            #expect(await second.exitStatus() == 0, "\(second.log)")
            #expect(Self.same(ScriptsHarness.outputs(double, source: script.logSourceID), expected))
        }
    }

    /// Whether two long line lists are equal; on a difference, says where (a plain `==`
    /// would print both lists whole).
    static func same(_ got: [String], _ expected: [String], sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        if got == expected { return true }
        let index = zip(got, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(got.count, expected.count)
        let seen = index < got.count ? got[index].prefix(80) : "<end>"
        let wanted = index < expected.count ? expected[index].prefix(80) : "<end>"
        Issue.record("\(got.count) lines, \(expected.count) expected; first difference at \(index): \"\(seen)\" instead of \"\(wanted)\"", sourceLocation: sourceLocation)
        return false
    }
}
