import AgentCore
import AgentTestSupport
import Foundation
import Testing

@testable import MCPEngine

/// What a server's `notifications/tools/list_changed` flood can make the agent do:
/// at most one `tools/list` a second after the first, against `Servers/list_changed_flood_http.py`,
/// a Streamable HTTP server that sends them as fast as it can and counts the listings.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct MCPListPacingTests {
    /// The server's counts through its `count` tool: tools/list received, notifications sent.
    static func counts(_ manager: MCPServerManager) async throws -> (lists: Int, sent: Int) {
        let result = try await manager.callTool("flood__count", arguments: nil)
        let words = (result.content.first?.text ?? "").split(separator: " ").compactMap { Int($0) }
        guard words.count == 2 else { return (0, 0) }
        return (words[0], words[1])
    }

    @Test func aListChangedFloodListsAtMostOnceASecond() async throws {
        let server = try await MCPHTTPTestServer.start("list_changed_flood_http.py", [])
        let h = try MCPServerManagerTests.Harness(servers: ["flood": ["type": "http", "url": server.url("/mcp")]])
        // Counted from before the engine starts: the bound below is loose by the time to connect.
        let started = ContinuousClock.now
        h.start()
        #expect(await eventually { h.entry("flood")?.connected == true })
        // Ordered by the server's counter and the test's clock, not by sleeps: 5 s in, with
        // the flood under way.
        var counts = (lists: 0, sent: 0)
        #expect(
            await eventually(timeout: .seconds(60)) {
                counts = (try? await Self.counts(h.manager)) ?? (0, 0)
                return counts.sent >= 200 && ContinuousClock.now - started >= .seconds(5)
            })
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        #expect(counts.lists >= 1)
        #expect(Double(counts.lists) <= seconds + 2, "\(counts.lists) listings in \(elapsed) (\(counts.sent) notifications sent)")
        await h.stop()
        await server.close()
    }
}
