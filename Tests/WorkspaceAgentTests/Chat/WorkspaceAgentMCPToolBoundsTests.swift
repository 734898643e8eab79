import AgentTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The tool bounds in the real binary, as its resident memory: two servers listing 8 tools
/// with 1 MiB descriptions each (16 MiB if held, as before the bounds) leave the agent holding
/// 128 KiB of them while they stay connected. Measured as what removing the servers gives
/// back (within 1 MiB over runs), so that what the allocator keeps after parsing the pages
/// counts on both sides. One 8 MiB page a server: a debug build parses it in about a second,
/// and a listing has 30 s even while the rest of the suite loads the host.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct WorkspaceAgentMCPToolBoundsTests {
    /// RSS samples of `pid` every 500 ms (`count` at least, at most 60), until the last four
    /// are within 512 KiB of each other.
    static func settledRSS(_ pid: pid_t, atLeast count: Int) async throws -> [Int] {
        var samples: [Int] = []
        for _ in 0..<60 {
            samples.append(rss(pid))
            let recent = samples.suffix(4)
            if samples.count >= count, recent.max()! - recent.min()! < 512 << 10 { break }
            try await Task.sleep(for: .milliseconds(500))
        }
        return samples
    }

    @Test func hugeDescriptionsAreNotHeldWhileConnected() async throws {
        let workspace = try await MCPWorkspace.start("mcp-tools")
        defer { workspace.cleanup() }
        let agent = workspace.agent
        // The agent frees some 25 MiB about 3 s after it starts: past that before servers come.
        _ = try await Self.settledRSS(agent.pid, atLeast: 8)

        let script = WorkspaceAgentMCPTests.servers + "/huge_tools.py"
        let entries = ["a", "b"].map {
            #""\#($0)": {"command": "python3", "args": ["\#(script)", "--pages", "1", "--page-size", "8", "--description-bytes", "1048576"]}"#
        }
        try workspace.declare(entries)
        var rows: [[String: Any]] = []
        #expect(
            await eventually(timeout: .seconds(120)) {
                rows = (try? await workspace.servers()) ?? []
                return rows.count == 2 && rows.allSatisfy { $0["tool_count"] as? Int == 8 && $0["descriptions_cut"] as? Int == 8 }
            }, "\(rows)\n\(agent.log.split(separator: "\n").filter { $0.contains("mcp") }.suffix(20).joined(separator: "\n"))")
        let held = rss(agent.pid)

        try workspace.declare([])
        #expect(await eventually { (try? await workspace.servers())?.isEmpty == true })
        let released = try await Self.settledRSS(agent.pid, atLeast: 6).min() ?? 0
        #expect(held - released < 8 << 20, "connected \(held >> 20) MiB, removed \(released >> 20) MiB")
    }
}
