import AgentProto
import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Synchronization
import SwiftProtobuf
import Testing

/// The manifest's scripts, end to end: the agent binary runs real shell scripts and reports
/// to the control-plane double over the real wire format.
@Suite(.timeLimit(.minutes(4)))
struct WorkspaceAgentScriptsTests {
    /// Two start scripts at once: stdout as INFO and stderr as ERROR under each source, the
    /// log files, the environment (script data dir, bin dir first on PATH, socket path,
    /// manifest variables), the shebang, exit 7 → EXIT_FAILURE/7 and START_ERROR after
    /// STARTING, READY never; then SIGTERM → SHUTTING_DOWN, OFF.
    @Test func startScriptsReportLogsOutcomesAndLifecycle() async throws {
        let workdir = try ScriptsHarness.directory("scripts-workdir")
        let logs = try ScriptsHarness.directory("scripts-logs")
        var manifest = ControlPlaneDouble.defaultManifest
        manifest.directory = workdir
        let ok = ScriptsHarness.script(
            """
            echo "out one"
            echo "err one" >&2
            printf 'crlf\\r\\n'
            echo "dir=$(pwd)"
            echo "data=$CODER_SCRIPT_DATA_DIR exists=$(test -d "$CODER_SCRIPT_DATA_DIR" && echo yes)"
            echo "path=$PATH bin=$CODER_SCRIPT_BIN_DIR"
            echo "socket=${CODER_AGENT_SOCKET_PATH:+set} manifest=$FROM_MANIFEST coder=$CODER"
            echo "prio=$(cat /proc/self/oom_score_adj) $(awk '{print $19}' /proc/self/stat)"
            printf 'tail without newline'
            """, logPath: "ok.log")
        let failing = ScriptsHarness.script("echo about to fail; exit 7")
        let python = ScriptsHarness.script("#!/usr/bin/env python3\nimport sys\nprint('from python', sys.version_info[0])\n")
        manifest.scripts = [ok, failing, python]
        let double = ControlPlaneDouble(manifest: manifest)
        let tokenFile = try ScriptsHarness.tokenFile(double)
        try await double.run { url in
            let agent = try AgentDaemon.launch(
                [
                    "--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile, "--log-dir", logs,
                ], environment: ["CODER_PROC_OOM_SCORE": "900", "CODER_PROC_NICE_SCORE": "7"])
            defer { agent.cleanup() }
            #expect(
                await eventually(timeout: .seconds(60)) {
                    ScriptsHarness.timings(double, script: ok.id).count == 1 && ScriptsHarness.timings(double, script: failing.id).count == 1
                        && ScriptsHarness.timings(double, script: python.id).count == 1
                }, "\(agent.log)")
            #expect(await eventually(timeout: .seconds(30)) { ScriptsHarness.lifecycle(double).last == .startError }, "\(agent.log)")
            #expect(ScriptsHarness.lifecycle(double) == [.starting, .startError])

            let okTiming = try #require(ScriptsHarness.timings(double, script: ok.id).first)
            #expect(okTiming.status == .ok && okTiming.exitCode == 0 && okTiming.stage == .start)
            #expect(okTiming.start.date <= okTiming.end.date)
            let failTiming = try #require(ScriptsHarness.timings(double, script: failing.id).first)
            #expect(failTiming.status == .exitFailure && failTiming.exitCode == 7)

            #expect(await eventually(timeout: .seconds(30)) { ScriptsHarness.outputs(double, source: ok.logSourceID).count == 9 })
            let lines = ScriptsHarness.lines(double, source: ok.logSourceID)
            let info = lines.filter { $0.level == .info }.map(\.output)
            let errors = lines.filter { $0.level == .error }.map(\.output)
            #expect(errors == ["err one"])
            #expect(info.first == "out one")
            #expect(info.contains("crlf"))
            #expect(info.contains("dir=\(workdir)"))
            #expect(info.contains { $0.hasPrefix("data=") && $0.hasSuffix("exists=yes") && $0.contains("/coder-script-data/") })
            // The script bin directory comes before the system's directories (a login
            // profile, such as cargo's, may still put its own in front).
            #expect(
                info.contains { line in
                    let parts = line.split(separator: " ")
                    guard parts.count == 2, parts[0].hasPrefix("path="), parts[1].hasPrefix("bin="), line.hasSuffix("/coder-script-data/bin") else { return false }
                    let entries = parts[0].dropFirst(5).split(separator: ":")
                    guard let bin = entries.firstIndex(of: parts[1].dropFirst(4)) else { return false }
                    return entries.firstIndex(of: "/usr/bin").map { bin < $0 } ?? true
                }, "\(info)")
            #expect(info.contains("socket=set manifest=yes coder=true"))
            #expect(info.contains("prio=900 7"), "scripts get the process API's priority (--proc-prio-mgmt)")
            #expect(info.last == "tail without newline")
            #expect(await eventually(timeout: .seconds(30)) { ScriptsHarness.outputs(double, source: python.logSourceID) == ["from python 3"] })
            #expect(await eventually(timeout: .seconds(30)) { ScriptsHarness.outputs(double, source: failing.logSourceID) == ["about to fail"] })

            let file = try String(contentsOfFile: logs + "/ok.log", encoding: .utf8)
            // stdout and stderr reach the file in the order they were read, not written.
            #expect(file.contains("out one\n") && file.contains("err one\n"))
            #expect(file.contains("crlf\r\n") && file.contains("tail without newline"))
            let defaultLog = logs + "/coder-script-\(ControlPlaneDouble.uuidText(failing.logSourceID)).log"
            #expect(try String(contentsOfFile: defaultLog, encoding: .utf8) == "about to fail\n")

            agent.signal(SIGTERM)
            #expect(await agent.exitStatus() == 0, "\(agent.log)")
            // The double records a report as its handler runs, which may be just after the
            // agent (which had its answer on the wire) has exited.
            #expect(
                await eventually(timeout: .seconds(10)) {
                    ScriptsHarness.lifecycle(double) == [.starting, .startError, .shuttingDown, .off]
                }, "\(ScriptsHarness.lifecycle(double)) \(agent.log)")
        }
    }

    /// No scripts: READY follows STARTING at once.
    @Test func noScriptsMeansReadyAtOnce() async throws {
        let double = ControlPlaneDouble()
        let tokenFile = try ScriptsHarness.tokenFile(double)
        try await double.run { url in
            let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile])
            defer { agent.cleanup() }
            #expect(await eventually(timeout: .seconds(60)) { ScriptsHarness.lifecycle(double) == [.starting, .ready] }, "\(agent.log)")
            agent.signal(SIGTERM)
            #expect(await agent.exitStatus() == 0, "\(agent.log)")
        }
    }
}
