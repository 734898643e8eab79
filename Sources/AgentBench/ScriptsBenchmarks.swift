import AgentProto
import ArgumentParser
import ControlPlaneDouble
import Foundation
import SwiftProtobuf
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `agent-bench scripts`: a start script writes `lines` numbered lines (`seq`); measured from
/// the run's start (its ScriptCompleted) until the control-plane double has every line:
/// lines/s and MiB/s end to end, against the same `seq` piped to `cat` (the rate a shell
/// pipeline moves the output); and the agent's CPU per MiB of script output, against `cat`'s
/// in that pipeline.
struct ScriptsBenchmarks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "scripts", abstract: "Scripts: startup log throughput.")

    @Option(help: "Path of the workspace-agent binary (default: next to agent-bench).")
    var agent: String?
    @Option(help: "Lines the script writes.") var lines = 1_000_000
    @Option(help: "Rounds (the median is reported).") var rounds = 3

    func run() async throws {
        let binary = try Bench.agentBinary(agent)
        let count = lines
        let bytes = Self.seqBytes(count)
        let mebibytes = Double(bytes) / 1_048_576

        // Baseline: `seq | cat`, wall time and cat's CPU (the pipeline's minus seq's alone).
        var baselineRates: [Double] = []
        var baselineCPU: [Double] = []
        for _ in 0..<rounds {
            let seqOnly = Self.childCPU { _ = Bench.wait(Bench.spawn(["/bin/sh", "-c", "seq 1 \(count) > /dev/null"])) }
            var wall: UInt64 = 0
            let pipeline = Self.childCPU {
                let start = Bench.now()
                _ = Bench.wait(Bench.spawn(["/bin/sh", "-c", "seq 1 \(count) | cat > /dev/null"]))
                wall = Bench.now() - start
            }
            baselineRates.append(Double(count) / (Double(wall) / 1e9))
            baselineCPU.append(max(0, pipeline - seqOnly) / mebibytes)
        }

        let samples = Mutex<(rates: [Double], cpu: [Double])>(([], []))
        for round in 0..<rounds {
            var manifest = ControlPlaneDouble.defaultManifest
            var script = Coder_Agent_V2_WorkspaceAgentScript()
            script.id = Self.uuid()
            script.logSourceID = Self.uuid()
            script.runOnStart = true
            script.script = "seq 1 \(count)"
            manifest.scripts = [script]
            let double = ControlPlaneDouble(manifest: manifest, keepsPayloads: false)
            let directory = NSTemporaryDirectory() + "agent-bench-scripts-\(getpid())-\(round)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let token = directory + "/token"
            try Data(double.token.utf8).write(to: URL(fileURLWithPath: token))
            try await double.run { url in
                let pid = Bench.spawn(
                    [
                        binary, "--http-address", "127.0.0.1:\(Bench.freePort())", "--state-dir", directory + "/state", "--log-level", "error",
                        "--prometheus-address", "", "--socket-server-enabled", "false", "--agent-url", url, "--agent-token-file", token,
                        "--script-data-dir", directory, "--log-dir", directory, "--tailnet", "false",
                        "--boundary-log-proxy-socket-path", "",
                    ],
                    stdoutPath: directory + "/agent.log")
                defer {
                    kill(pid, SIGTERM)
                    _ = Bench.wait(pid)
                }
                let cpuBefore = Bench.cpuSeconds(pid)
                var delivered = 0
                for _ in 0..<24_000 {
                    delivered = double.recorded.withLock { $0.logLineCount }
                    if delivered >= count { break }
                    usleep(2_500)
                }
                let done = Date()
                let cpuAfter = Bench.cpuSeconds(pid)
                // The run's own start, as the agent reported it.
                var started: Date?
                for _ in 0..<2_000 {
                    started = double.recorded.withLock { $0.scriptTimings.first?.start.date }
                    if started != nil { break }
                    usleep(5_000)
                }
                guard delivered >= count, let started else {
                    print("agent-bench scripts: only \(delivered) of \(count) lines arrived")
                    return
                }
                samples.withLock {
                    $0.rates.append(Double(count) / done.timeIntervalSince(started))
                    $0.cpu.append((cpuAfter - cpuBefore) / mebibytes)
                }
            }
        }
        let (rates, cpu) = samples.withLock { ($0.rates, $0.cpu) }
        guard !rates.isEmpty else { throw ExitCode(1) }
        let rate = Bench.median(rates)
        let baseline = Bench.median(baselineRates)
        let mibRate = rate * Double(bytes) / Double(count) / 1_048_576
        let baselineMib = baseline * Double(bytes) / Double(count) / 1_048_576
        print("agent-bench scripts: \(count) lines (\(Bench.mib(bytes))) from a start script to the control-plane double, median of \(rounds)")
        report(
            "script lines to the control plane", value: String(format: "%.0f lines/s", rate),
            baseline: String(format: "%.0f lines/s", baseline), ratio: rate / baseline,
            goal: ">= 0.01x seq | cat", met: rate / baseline >= 0.01)
        report(
            "  the same in MiB/s", value: String(format: "%.1f MiB/s", mibRate), baseline: String(format: "%.1f MiB/s", baselineMib),
            ratio: mibRate / baselineMib, goal: "(information)", met: true)
        let agentCPU = Bench.median(cpu)
        let catCPU = Bench.median(baselineCPU)
        report(
            "agent CPU per MiB of output", value: String(format: "%.0f ms/MiB", agentCPU * 1000),
            baseline: String(format: "%.1f ms/MiB", catCPU * 1000), ratio: catCPU > 0 ? agentCPU / catCPU : 0,
            goal: "(information: cat only copies bytes)", met: true)
    }

    /// Bytes `seq 1 n` writes.
    static func seqBytes(_ n: Int) -> Int {
        var total = 0
        var width = 1
        var low = 1
        while low <= n {
            let high = min(n, low * 10 - 1)
            total += (high - low + 1) * (width + 1)
            low *= 10
            width += 1
        }
        return total
    }

    /// CPU seconds this process's reaped children used during `body`.
    static func childCPU(_ body: () -> Void) -> Double {
        var before = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &before)
        body()
        var after = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &after)
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(after.ru_utime) + seconds(after.ru_stime) - seconds(before.ru_utime) - seconds(before.ru_stime)
    }

    static func uuid() -> Data {
        withUnsafeBytes(of: UUID().uuid) { Data($0) }
    }
}
