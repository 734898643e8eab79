import ArgumentParser
import Foundation
import HostStats

#if canImport(Glibc)
import Glibc
#endif

/// `agent-bench templates`: the in-workspace commands as whole processes, as a metadata
/// script runs them, each against a baseline of the same run (alternating, median).
struct TemplatesBenchmarks: AsyncParsableCommand {
    // stat cpu against the 100 ms sample it includes (as this host sleeps it); stat mem and
    // disk against tools reading the same figures (cat /proc/meminfo, stat -f /), goal 10 ms;
    // a helper command's start-up (coder --help) against /bin/true; git clone over HTTP with
    // the agent as askpass against the credentials in the URL.
    static let configuration = CommandConfiguration(
        commandName: "templates", abstract: "Templates: the in-workspace commands' cost (stat cpu, mem, disk; start-up; git clone with askpass).")

    @Option(help: "Path of the workspace-agent binary (default: next to agent-bench).")
    var agent: String?
    @Option(help: "Runs per figure (the median is reported).") var runs = 31

    func run() async throws {
        // Absolute: the `coder` link below points at it from another directory.
        let binary = URL(fileURLWithPath: try Bench.agentBinary(agent)).standardizedFileURL.path
        // The binary under the name templates call it by.
        let links = NSTemporaryDirectory() + "agent-bench-templates-\(getpid())"
        try FileManager.default.createDirectory(atPath: links, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: links) }
        let coder = links + "/coder"
        try FileManager.default.createSymbolicLink(atPath: coder, withDestinationPath: binary)
        let cat = Bench.onPath("cat") ?? "/bin/cat"
        let statTool = Bench.onPath("stat") ?? "/usr/bin/stat"
        let truePath = Bench.onPath("true") ?? "/bin/true"

        print("agent-bench templates: whole processes, median of \(runs) alternating runs each")
        let sample = 100.0e6
        let (cpu, slept) = Self.pair(
            runs: max(5, runs / 3), { Self.time([coder, "stat", "cpu"]) },
            {
                let start = Bench.now()
                usleep(100_000)
                return Double(Bench.now() - start)
            })
        report(
            "coder stat cpu (100 ms sample)", value: Bench.format(cpu), baseline: Bench.format(slept) + " sleep",
            ratio: cpu / slept, goal: "<= 1.1x the sample", met: cpu <= 1.1 * sample)

        let (memory, catMemory) = Self.pair(runs: runs, { Self.time([coder, "stat", "mem"]) }, { Self.time([cat, "/proc/meminfo"]) })
        report(
            "coder stat mem", value: Bench.format(memory), baseline: Bench.format(catMemory) + " cat",
            ratio: memory / catMemory, goal: "<= 10 ms", met: memory <= 10e6)

        let (disk, statfs) = Self.pair(runs: runs, { Self.time([coder, "stat", "disk"]) }, { Self.time([statTool, "-f", "/"]) })
        report(
            "coder stat disk", value: Bench.format(disk), baseline: Bench.format(statfs) + " stat -f",
            ratio: disk / statfs, goal: "<= 10 ms", met: disk <= 10e6)

        // What the commands do once started, without the process: the statter (it reads
        // /proc/stat, /proc/cpuinfo and the container markers) and one figure.
        let (memoryWork, diskWork) = Self.pair(
            runs: runs * 10,
            {
                Self.elapsed { _ = try? HostStatter().hostMemory(.gibi) }
            },
            {
                Self.elapsed { _ = try? HostStatter().disk(.gibi, path: "/") }
            })
        report(
            "  stat mem, in process", value: Bench.format(memoryWork), baseline: Bench.format(memory) + " whole",
            ratio: memoryWork / memory, goal: "(information: the rest is start-up)", met: true)
        report(
            "  stat disk, in process", value: Bench.format(diskWork), baseline: Bench.format(disk) + " whole",
            ratio: diskWork / disk, goal: "(information)", met: true)

        let (help, bare) = Self.pair(runs: runs, { Self.time([coder, "--help"]) }, { Self.time([truePath]) })
        report(
            "coder --help (start-up)", value: Bench.format(help), baseline: Bench.format(bare) + " true",
            ratio: help / bare, goal: "<= 2x true + 10 ms", met: help <= 2 * bare + 10e6)
        let (statHelp, bareAgain) = Self.pair(runs: runs, { Self.time([binary, "stat", "--help"]) }, { Self.time([truePath]) })
        report(
            "  workspace-agent stat --help", value: Bench.format(statHelp), baseline: Bench.format(bareAgain) + " true",
            ratio: statHelp / bareAgain, goal: "(information)", met: true)
        try await Self.gitClone(binary: binary, runs: max(5, runs / 3))
    }

    /// Wall time of one run of `argv` to its exit, output discarded (nanoseconds).
    static func time(_ argv: [String]) -> Double {
        elapsed { _ = Bench.wait(Bench.spawn(argv, stdoutPath: "/dev/null")) }
    }

    /// Wall time of `body` (nanoseconds).
    static func elapsed(_ body: () -> Void) -> Double {
        let start = Bench.now()
        body()
        return Double(Bench.now() - start)
    }

    /// Medians of `a` and `b` over `runs` runs each, alternating (this host's speed drifts).
    static func pair(runs: Int, _ a: () -> Double, _ b: () -> Double) -> (Double, Double) {
        var first: [Double] = []
        var second: [Double] = []
        // One of each first, unmeasured: the page cache and the dynamic loader warm up.
        _ = a()
        _ = b()
        for _ in 0..<runs {
            first.append(a())
            second.append(b())
        }
        return (Bench.median(first), Bench.median(second))
    }
}
