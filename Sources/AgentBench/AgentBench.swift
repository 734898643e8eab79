import ArgumentParser
import Foundation

/// `agent-bench`: each capability's benchmark, every figure a ratio against a baseline
/// measured in the same run. Build with `-c release` (`make bench`).
@main
struct AgentBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent-bench",
        abstract: "WorkspaceAgent benchmarks (release build; loopback only).",
        subcommands: [
            ProcessBenchmarks.self, HTTPBenchmarks.self, RouteDispatchBenchmark.self, NIOHTTPServerCommand.self, HummingbirdHTTPServerCommand.self, ManifestBenchmarks.self, RPCBenchmarks.self, HardeningBenchmarks.self, SocketBenchmarks.self, FilesBenchmarks.self, GitBenchmarks.self, DesktopBenchmarks.self, BoundaryBenchmarks.self, TailnetBenchmarks.self, TailnetDirectBenchmarks.self, ScriptsBenchmarks.self, ChatBenchmarks.self, SSHBenchmarks.self, TemplatesBenchmarks.self,
            OutboundBenchmarks.self,
            TLSBenchmarks.self, SpeedtestBenchmarks.self,
        ],
        defaultSubcommand: ProcessBenchmarks.self
    )
}

/// Prints one result line: the figure, its baseline, the ratio and the goal.
func report(_ name: String, value: String, baseline: String, ratio: Double, goal: String, met: Bool) {
    func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
    func left(_ s: String, _ n: Int) -> String { s.count >= n ? s : String(repeating: " ", count: n - s.count) + s }
    let mark = met ? "ok  " : "MISS"
    print("\(mark) \(pad(name, 36)) \(left(value, 12))  baseline \(left(baseline, 12))  ratio \(left(String(format: "%.2f", ratio), 6))x  goal \(goal)")
}
