import AgentTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The MCP servers' shared memory budget in the real binary, measured as the agent's own
/// resident memory: sixteen servers each writing a 15 MiB message without its newline
/// (240 MiB if each were held) stay within the budget, and the memory goes back once they
/// are removed.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct WorkspaceAgentMCPMemoryTests {
    static let servers = 16

    /// `VmRSS` or `VmHWM` of `pid` in bytes (0 when unreadable).
    static func memory(_ pid: pid_t, _ field: String) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
        }
        return 0
    }

    @Test func manyLongMessagesStayWithinTheBudgetAndTheMemoryGoesBack() async throws {
        let workspace = try await MCPWorkspace.start("mcp-memory")
        defer { workspace.cleanup() }
        let (agent, markers) = (workspace.agent, workspace.base + "/markers")
        try FileManager.default.createDirectory(atPath: markers, withIntermediateDirectories: true)
        let idle = Self.memory(agent.pid, "VmRSS")

        let script = WorkspaceAgentMCPTests.servers + "/flood_mcp.py"
        let entries = (0..<Self.servers).map { #""s\#($0)": {"command": "python3", "args": ["\#(script)", "long-line", "15", "\#(markers)"]}"# }
        try workspace.declare(entries)
        // Each server either wrote its whole message (a marker) or had it refused.
        func settled() async -> Int {
            let written = (try? FileManager.default.contentsOfDirectory(atPath: markers).count) ?? 0
            let rows = (try? await workspace.servers()) ?? []
            return written + rows.count { ($0["last_error"] as? String ?? "").contains("buffers are full") }
        }
        #expect(await eventually(timeout: .seconds(120)) { await settled() >= Self.servers })
        let peak = Self.memory(agent.pid, "VmHWM")
        #expect(peak - idle < 160 << 20, "idle \(idle >> 20) MiB, peak \(peak >> 20) MiB")

        try workspace.declare([])
        #expect(await eventually { (try? await workspace.servers())?.isEmpty == true })
        #expect(
            await eventually(timeout: .seconds(60)) { Self.memory(agent.pid, "VmRSS") - idle < 64 << 20 },
            "idle \(idle >> 20) MiB, now \(Self.memory(agent.pid, "VmRSS") >> 20) MiB")
    }
}
