import AgentProto
import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Synchronization
import SwiftProtobuf
import Testing

/// Script outcomes that take real time: timeouts, pipes left open, cron, stop scripts,
/// `coder exp sync` ordering, on-demand runs and setup failures.
@Suite(.timeLimit(.minutes(4)))
struct WorkspaceAgentScriptOutcomeTests {
    /// A timeout SIGHUPs the whole group (the background child dies too) → TIMED_OUT/255 and
    /// START_TIMEOUT (the first error); exit 0 with a background child holding stdout →
    /// PIPES_LEFT_OPEN/255 with the warning as an ERROR line, without hanging.
    @Test func timeoutAndPipesLeftOpen() async throws {
        let dir = try ScriptsHarness.directory("scripts-timeout")
        var manifest = ControlPlaneDouble.defaultManifest
        let slow = ScriptsHarness.script("sleep 120 & echo $! > \(dir)/child; wait", timeout: 1)
        let holder = ScriptsHarness.script("sleep 40 & echo started")
        // Writes without pause: reading it must not keep the deadline from being checked.
        let flood = ScriptsHarness.script("cat /dev/zero", timeout: 1, logPath: "/dev/null")
        manifest.scripts = [slow, holder, flood]
        let double = ControlPlaneDouble(manifest: manifest)
        let tokenFile = try ScriptsHarness.tokenFile(double)
        try await double.run { url in
            let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile])
            defer { agent.cleanup() }
            #expect(await eventually(timeout: .seconds(60)) { ScriptsHarness.timings(double, script: slow.id).count == 1 }, "\(agent.log)")
            let timedOut = try #require(ScriptsHarness.timings(double, script: slow.id).first)
            #expect(timedOut.status == .timedOut && timedOut.exitCode == 255)
            #expect(await eventually(timeout: .seconds(60)) { ScriptsHarness.timings(double, script: flood.id).first?.status == .timedOut }, "\(agent.log)")
            let child = try #require(Int32(try String(contentsOfFile: dir + "/child", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
            #expect(await eventually(timeout: .seconds(30)) { kill(child, 0) != 0 }, "the timed-out script's background child still runs")

            #expect(await eventually(timeout: .seconds(60)) { ScriptsHarness.timings(double, script: holder.id).count == 1 }, "\(agent.log)")
            let held = try #require(ScriptsHarness.timings(double, script: holder.id).first)
            #expect(held.status == .pipesLeftOpen && held.exitCode == 255)
            #expect(
                await eventually(timeout: .seconds(30)) {
                    ScriptsHarness.lines(double, source: holder.logSourceID).contains { $0.level == .error && $0.output.hasPrefix("WARNING: script exited successfully, but output pipes were not closed after 10s.") }
                })
            #expect(ScriptsHarness.outputs(double, source: holder.logSourceID).first == "started")
            #expect(await eventually(timeout: .seconds(30)) { ScriptsHarness.lifecycle(double).last == .startTimeout })
            #expect(ScriptsHarness.lifecycle(double) == [.starting, .startTimeout])
            agent.signal(SIGTERM)
            #expect(await agent.exitStatus() == 0, "\(agent.log)")
        }
    }

    /// Cron seconds first: `* * * * * *` every second, `@every 1s` (a descriptor the
    /// reference rejects) and a five-field spec (read seconds first, with a warning line);
    /// runs only after the start phase, stage CRON, and none begins after exit.
    @Test func cronRunsEverySecondAndStopsAtExit() async throws {
        var manifest = ControlPlaneDouble.defaultManifest
        let everySecond = ScriptsHarness.script("echo tick", onStart: false, cron: "* * * * * *")
        let descriptor = ScriptsHarness.script("echo every", onStart: false, cron: "@every 1s")
        let fiveFields = ScriptsHarness.script("echo five", onStart: false, cron: "*/2 * * * *")
        let starter = ScriptsHarness.script("sleep 2; echo started")
        manifest.scripts = [everySecond, descriptor, fiveFields, starter]
        let double = ControlPlaneDouble(manifest: manifest)
        let tokenFile = try ScriptsHarness.tokenFile(double)
        try await double.run { url in
            let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile])
            defer { agent.cleanup() }
            #expect(
                await eventually(timeout: .seconds(90)) {
                    ScriptsHarness.timings(double, script: everySecond.id).count >= 3 && ScriptsHarness.timings(double, script: descriptor.id).count >= 3
                        && ScriptsHarness.timings(double, script: fiveFields.id).count >= 2
                }, "\(agent.log)")
            let startEnd = try #require(ScriptsHarness.timings(double, script: starter.id).first).end.date
            for timing in ScriptsHarness.timings(double, script: everySecond.id) {
                #expect(timing.stage == .cron && timing.status == .ok)
                #expect(timing.start.date >= startEnd.addingTimeInterval(-0.01), "a cron run began before the start phase ended")
            }
            // Both go upward apart from the timings waited for above.
            #expect(await eventually(timeout: .seconds(60)) { ScriptsHarness.lifecycle(double).contains(.ready) })
            #expect(
                await eventually(timeout: .seconds(60)) {
                    ScriptsHarness.outputs(double, source: fiveFields.logSourceID).contains { $0.contains("read seconds first") }
                })
            agent.signal(SIGTERM)
            #expect(await agent.exitStatus() == 0, "\(agent.log)")
            // A report the agent sent just before it ended may be recorded by the double a
            // moment later (a loaded run saw one): what must hold is that no run began after
            // the agent was gone, however late its report is read.
            let exited = Date()
            try await Task.sleep(for: .seconds(2))
            let late = ScriptsHarness.timings(double, script: everySecond.id).filter { $0.start.date > exited }
            #expect(late.isEmpty, "cron runs began after the agent exited: \(late.map(\.start.date))")
        }
    }

    /// SIGTERM: stop scripts run while the agent socket still answers (`coder exp sync ping`
    /// through the bin dir's link), their lines and STOP reports reach the control plane
    /// before it ends, and a failing one makes the final state SHUTDOWN_ERROR.
    @Test func stopScriptsRunAtShutdownAndSetTheFinalState() async throws {
        let dir = try ScriptsHarness.directory("scripts-stop")
        var manifest = ControlPlaneDouble.defaultManifest
        let stopper = ScriptsHarness.script("echo stopping; coder exp sync ping && echo socket-open; touch \(dir)/stopped", onStart: false, onStop: true)
        let failing = ScriptsHarness.script("echo failing stop; exit 3", onStart: false, onStop: true)
        manifest.scripts = [stopper, failing]
        let double = ControlPlaneDouble(manifest: manifest)
        let tokenFile = try ScriptsHarness.tokenFile(double)
        try await double.run { url in
            let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile])
            defer { agent.cleanup() }
            #expect(await eventually(timeout: .seconds(60)) { ScriptsHarness.lifecycle(double) == [.starting, .ready] }, "\(agent.log)")
            #expect(!FileManager.default.fileExists(atPath: dir + "/stopped"))
            agent.signal(SIGTERM)
            #expect(await agent.exitStatus() == 0, "\(agent.log)")
            #expect(FileManager.default.fileExists(atPath: dir + "/stopped"))
            #expect(ScriptsHarness.lifecycle(double) == [.starting, .ready, .shuttingDown, .shutdownError], "\(agent.log)")
            let stop = try #require(ScriptsHarness.timings(double, script: stopper.id).first)
            #expect(stop.stage == .stop && stop.status == .ok)
            let failed = try #require(ScriptsHarness.timings(double, script: failing.id).first)
            #expect(failed.stage == .stop && failed.status == .exitFailure && failed.exitCode == 3)
            #expect(ScriptsHarness.outputs(double, source: stopper.logSourceID) == ["stopping", "Success", "socket-open"], "\(agent.log)")
        }
    }

    /// A stop script that outlives the agent's own 7 s bound is allowed its timeout: it is
    /// cut at 9 s (SHUTDOWN_TIMEOUT, its group killed) and the agent still exits 0, not
    /// through the watchdog (the bound grew by the stop scripts' allowance).
    @Test func aStopScriptTimeoutExtendsTheShutdownBound() async throws {
        let dir = try ScriptsHarness.directory("scripts-stop-timeout")
        var manifest = ControlPlaneDouble.defaultManifest
        let slow = ScriptsHarness.script("echo stopping; sleep 120 & echo $! > \(dir)/child; wait", onStart: false, onStop: true, timeout: 9)
        manifest.scripts = [slow]
        let double = ControlPlaneDouble(manifest: manifest)
        let tokenFile = try ScriptsHarness.tokenFile(double)
        try await double.run { url in
            let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile])
            defer { agent.cleanup() }
            #expect(await eventually(timeout: .seconds(60)) { ScriptsHarness.lifecycle(double).last == .ready }, "\(agent.log)")
            agent.signal(SIGTERM)
            #expect(await agent.exitStatus(timeout: .seconds(60)) == 0, "\(agent.log)")
            #expect(!agent.log.contains("did not finish"), "\(agent.log)")
            #expect(ScriptsHarness.lifecycle(double) == [.starting, .ready, .shuttingDown, .shutdownTimeout], "\(agent.log)")
            let timing = try #require(ScriptsHarness.timings(double, script: slow.id).first)
            #expect(timing.stage == .stop && timing.status == .timedOut && timing.exitCode == 255)
            #expect(timing.end.date.timeIntervalSince(timing.start.date) >= 8.5)
            let child = try #require(Int32(try String(contentsOfFile: dir + "/child", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
            #expect(await eventually(timeout: .seconds(30)) { kill(child, 0) != 0 }, "the stop script's background child still runs")
        }
    }

    /// Two start scripts ordered with `coder exp sync` (the docs' form, through the link):
    /// `a` wants `b`, so `b` writes first although it starts a second later; READY after both.
    @Test func scriptsOrderedWithCoderExpSync() async throws {
        let dir = try ScriptsHarness.directory("scripts-sync")
        let order = dir + "/order"
        var manifest = ControlPlaneDouble.defaultManifest
        let first = ScriptsHarness.script(
            """
            trap 'coder exp sync complete a' EXIT
            coder exp sync want a b
            coder exp sync start a
            echo A >> \(order)
            """)
        let second = ScriptsHarness.script(
            """
            sleep 1
            trap 'coder exp sync complete b' EXIT
            coder exp sync start b
            echo B >> \(order)
            """)
        manifest.scripts = [first, second]
        let double = ControlPlaneDouble(manifest: manifest)
        let tokenFile = try ScriptsHarness.tokenFile(double)
        try await double.run { url in
            let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile])
            defer { agent.cleanup() }
            #expect(await eventually(timeout: .seconds(90)) { ScriptsHarness.lifecycle(double).last == .ready }, "\(agent.log)")
            #expect(try String(contentsOfFile: order, encoding: .utf8) == "B\nA\n")
            // The report travels apart from the lifecycle: it may come a little later.
            #expect(await eventually(timeout: .seconds(60)) { ScriptsHarness.timings(double, script: first.id).first?.status == .ok })
            agent.signal(SIGTERM)
            #expect(await agent.exitStatus() == 0, "\(agent.log)")
        }
    }

    /// `POST /api/v0/scripts/{id}/run` runs a script again (a new ScriptCompleted, stage
    /// CRON); `GET /api/v0/scripts` shows both runs; a bad or unknown id is refused. A log
    /// path the agent cannot create fails the run with a line on the script's source and a
    /// report (EXIT_FAILURE, 255).
    @Test func onDemandRunsStatusAndSetupFailures() async throws {
        let dir = try ScriptsHarness.directory("scripts-demand")
        var manifest = ControlPlaneDouble.defaultManifest
        let counter = ScriptsHarness.script("echo run >> \(dir)/runs; echo ran")
        let broken = ScriptsHarness.script("echo never", logPath: "/proc/no-such-dir/script.log")
        manifest.scripts = [counter, broken]
        let double = ControlPlaneDouble(manifest: manifest)
        let tokenFile = try ScriptsHarness.tokenFile(double)
        try await double.run { url in
            let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile])
            defer { agent.cleanup() }
            let client = RawHTTPClient(port: try await agent.port())
            #expect(await eventually(timeout: .seconds(60)) { ScriptsHarness.lifecycle(double).last == .startError }, "\(agent.log)")
            #expect(await eventually(timeout: .seconds(60)) { !ScriptsHarness.timings(double, script: broken.id).isEmpty })
            let brokenTiming = try #require(ScriptsHarness.timings(double, script: broken.id).first)
            #expect(brokenTiming.status == .exitFailure && brokenTiming.exitCode == 255)
            #expect(
                await eventually(timeout: .seconds(30)) {
                    ScriptsHarness.outputs(double, source: broken.logSourceID).contains { $0.contains("script setup failed") && $0.contains("/proc/no-such-dir") }
                })

            let id = ControlPlaneDouble.uuidText(counter.id)
            let accepted = try await client.request("POST", "/api/v0/scripts/\(id)/run")
            #expect(accepted.status == 202, "\(accepted)")
            #expect(jsonObject(accepted.body)?["run"] as? Int == 2)
            #expect(await eventually(timeout: .seconds(30)) { ScriptsHarness.timings(double, script: counter.id).count == 2 })
            #expect(ScriptsHarness.timings(double, script: counter.id).map(\.stage) == [.start, .cron])
            #expect(try String(contentsOfFile: dir + "/runs", encoding: .utf8) == "run\nrun\n")

            // The run's record is kept just after its report goes upward: waited for.
            var entry: [String: Any] = [:]
            var runs: [[String: Any]] = []
            #expect(
                try await eventually(timeout: .seconds(30)) {
                    let status = try await client.request("GET", "/api/v0/scripts")
                    let body = jsonObject(status.body)
                    guard status.status == 200, body?["lifecycle"] as? String == "start_error",
                        let found = (body?["scripts"] as? [[String: Any]])?.first(where: { $0["id"] as? String == id })
                    else { return false }
                    entry = found
                    runs = found["runs"] as? [[String: Any]] ?? []
                    return runs.count == 2
                })
            #expect(runs.map { $0["stage"] as? String } == ["start", "on_demand"])
            #expect(runs.allSatisfy { $0["status"] as? String == "ok" && $0["exit_code"] as? Int == 0 })
            #expect((entry["log_path"] as? String)?.hasSuffix(".log") == true)

            #expect(try await client.request("POST", "/api/v0/scripts/not-a-uuid/run").status == 400)
            #expect(try await client.request("POST", "/api/v0/scripts/\(UUID().uuidString)/run").status == 404)
            agent.signal(SIGTERM)
            #expect(await agent.exitStatus() == 0, "\(agent.log)")
        }
    }
}
