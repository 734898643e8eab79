import AgentProto
import ArgumentParser
import ControlPlaneDouble
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `agent-bench manifest`: the time from the agent's GetManifest to its UpdateStartup for a
/// 1 MB and a 3 MB manifest (the real binary against the control-plane double), so that
/// manifest handling is shown linear in size: 3 MB within 3× the time of 1 MB.
struct ManifestBenchmarks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "manifest",
        abstract: "Manifest handling: GetManifest to UpdateStartup for 1 MB and 3 MB manifests."
    )

    @Option(help: "Path of the workspace-agent binary (default: next to agent-bench).")
    var agent: String?
    @Option(help: "Rounds (a 1 MB and a 3 MB manifest each; median ratio).") var rounds = 7
    @Option(help: "Bytes of the small manifest.") var small = 1_000_000
    @Option(help: "Bytes of the large manifest (the goal scales with large/small).") var large = 3_000_000

    func run() async throws {
        let binary = try Bench.agentBinary(agent)
        print("agent-bench manifest: \(Bench.relative(binary))")
        // Pairs measured back to back; the median of their ratios (this host's speed drifts).
        var smallTimes: [Double] = []
        var largeTimes: [Double] = []
        var ratios: [Double] = []
        let (smallManifest, largeManifest) = (Self.manifest(bytes: small), Self.manifest(bytes: large))
        for _ in 0..<rounds {
            smallTimes.append(try await Self.measure(binary, manifest: smallManifest))
            largeTimes.append(try await Self.measure(binary, manifest: largeManifest))
            ratios.append(largeTimes[largeTimes.count - 1] / smallTimes[smallTimes.count - 1])
        }
        let ratio = Bench.median(ratios)
        let scale = Double(large) / Double(small)
        let mb = { (bytes: Int) in String(format: "%g MB", Double(bytes) / 1e6) }
        report(
            "\(mb(large)) manifest -> UpdateStartup", value: Bench.format(Bench.median(largeTimes)),
            baseline: Bench.format(Bench.median(smallTimes)), ratio: ratio,
            goal: String(format: "<= %gx the %@ manifest", scale, mb(small)), met: ratio <= scale)
    }

    /// A manifest of about `bytes`: environment variables (a third refer to earlier ones,
    /// so expansion has work to do), scripts and apps, as a large template produces.
    static func manifest(bytes: Int) -> Coder_Agent_V2_Manifest {
        var manifest = ControlPlaneDouble.defaultManifest
        var size = 0
        var index = 0
        while size < bytes {
            let name = "BENCH_VAR_\(index)"
            let value = index % 3 == 2 ? "${BENCH_VAR_\(index - 1)}:/opt/tool-\(index)/bin" : String(repeating: "v", count: 80)
            manifest.environmentVariables[name] = value
            size += name.utf8.count + value.utf8.count + 4
            if index % 50 == 0 {
                var script = Coder_Agent_V2_WorkspaceAgentScript()
                script.logSourceID = Data((0..<16).map { UInt8(($0 + index) & 0xff) })
                script.logPath = "/tmp/script-\(index).log"
                script.script = "#!/bin/sh\necho script \(index)\n" + String(repeating: "# padding line\n", count: 20)
                script.runOnStart = index % 100 == 0
                manifest.scripts.append(script)
                var app = Coder_Agent_V2_WorkspaceApp()
                app.slug = "app-\(index)"
                app.displayName = "App \(index)"
                app.url = "http://localhost:\(3000 + index % 1000)"
                manifest.apps.append(app)
                size += script.script.utf8.count + 120
            }
            index += 1
        }
        return manifest
    }

    /// Starts the agent against a double serving `manifest`; GetManifest → UpdateStartup, ns.
    static func measure(_ binary: String, manifest: Coder_Agent_V2_Manifest) async throws -> Double {
        let double = ControlPlaneDouble(manifest: manifest)
        let directory = NSTemporaryDirectory() + "agent-bench-manifest-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = Mutex<Double?>(nil)
        try await double.run { url in
            let pid = Bench.spawn(
                [
                    binary, "--http-address", "127.0.0.1:\(Bench.freePort())", "--state-dir", directory + "/state", "--log-level", "error",
                    "--prometheus-address", "", "--socket-server-enabled", "false", "--agent-url", url,
                    "--agent-token-file", try BoundaryBenchmarks.tokenFile(double.token, in: directory),
                ],
                stdoutPath: directory + "/agent.log")
            defer {
                kill(pid, SIGTERM)
                _ = Bench.wait(pid)
            }
            // At most 30 s.
            for _ in 0..<3000 {
                let (asked, started) = double.recorded.withLock { ($0.manifestTimes.first, $0.startupTimes.first) }
                if let asked, let started {
                    let duration = started - asked
                    result.withLock { $0 = Double(duration.components.seconds) * 1e9 + Double(duration.components.attoseconds) / 1e9 }
                    break
                }
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        guard let elapsed = result.withLock({ $0 }) else { throw ValidationError("the agent sent no UpdateStartup within 30 s (\(Bench.relative(directory))/agent.log)") }
        return elapsed
    }
}
