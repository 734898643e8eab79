import AgentCore
import AgentHTTP
import AgentTestSupport
import HTTPTypes
import Testing

@testable import MCPEngine

/// A tool result the agent would have to multiply to pass on: `Servers/huge_tools.py`
/// answers `tools/call` with millions of items that are not objects (`0,`, two bytes each,
/// each mapped to a text item of about 56 bytes). The call fails as a 502 naming the bound,
/// instead of an answer twenty times the message.
@Suite(.timeLimit(.minutes(5)))
struct MCPCallResultBoundsTests {
    @Test func aResultOfMillionsOfTinyItemsFailsTheCallAsA502() async throws {
        // 6 MiB of `0,`: the old mapping made 3 million items and an answer of some 170 MiB.
        let zeros = 3 << 20
        let h = try MCPServerManagerTests.Harness(
            servers: ["huge": MCPToolBudgetTests.huge(["--call-zeros", "\(zeros)"])], timeouts: .init(call: .seconds(120)))
        h.start()
        #expect(await eventually(timeout: .seconds(60)) { h.entry("huge")?.connected == true })
        do {
            _ = try await h.manager.callTool("huge__t0_0", arguments: nil)
            Issue.record("a result of \(zeros) items was passed on")
        } catch {
            let detail = #"call tool "t0_0" on "huge": tools/call result has \#(zeros) content items, more than the \#(MCPLimits.maxResultItems) passed on"#
            #expect(error == .failed(detail))
            let api = MCPRoutes.apiError(error)
            #expect(api.status == .badGateway && api.body.message == "MCP tool call failed." && api.body.detail == detail, "\(api)")
        }
        // The session goes on: the refusal is the call's, not the server's.
        #expect(h.server("huge")?.state == .connected)
        #expect(h.manager.callsInFlight == 0)
        await h.stop()
    }
}
