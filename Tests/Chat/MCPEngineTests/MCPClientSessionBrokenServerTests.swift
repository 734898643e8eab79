import AgentCore
import AgentTestSupport
import MCPEngine
import Testing

/// The MCP client against stdio servers that break the protocol: `not_mcp.py`, a few lines of
/// plain Python (no MCP SDK), cheap to start, so these tests run side by side (no
/// serialization needed).
@Suite(.timeLimit(.minutes(5)))
struct MCPClientSessionBrokenServerTests {
    @Test func serverThatNeverAnswersInitializeTimesOut() async throws {
        let log = LogLines()
        await #expect {
            try await MCPTestServers.connect("not_mcp.py", ["silent"], timeouts: .init(connect: .milliseconds(500)), log: log)
        } throws: { error in
            let error = error as? MCPError
            return error?.kind == .timeout && error?.message == "initialize: timed out after 0.5 seconds"
        }
    }

    @Test func stubbornServerIsKilledAfterTheGraces() async throws {
        // It ignores stdin's end and SIGTERM: only the SIGKILL at the end of the sequence ends
        // it, and that goes to its whole group (the `sleep` it started too).
        let log = LogLines()
        let process = try MCPStdioProcess.start(
            try MCPTestServers.command("not_mcp.py", ["stubborn"]), timing: .init(stdinGrace: .milliseconds(200), termGrace: .milliseconds(200)),
            stderrLine: { log.append("test", $0) }, events: { _ in })
        #expect(await eventually { log.all.contains { $0.line.hasPrefix("child ") } })
        let childLine = try #require(log.all.first { $0.line.hasPrefix("child ") })
        let child = try #require(Int32(childLine.line.dropFirst("child ".count)))
        await process.close()
        #expect(process.isFinished)
        #expect(MCPTestServers.isGone(process.pid))
        #expect(await eventually { MCPTestServers.isGoneOrZombie(child) })
    }

    @Test func garbageOutputIsReportedInTheError() async throws {
        let log = LogLines()
        await #expect {
            try await MCPTestServers.connect("not_mcp.py", ["garbage"], log: log)
        } throws: { error in
            let error = error as? MCPError
            return error?.kind == .invalidResponse && error?.message.hasPrefix("initialize: the server wrote output that is not JSON-RPC: not JSON") == true
        }
        #expect(log.all.contains { $0.server == "test" && $0.line.hasPrefix("stdout line is not JSON-RPC: not JSON") })
    }

    @Test func overlongMessageEndsTheSession() async throws {
        await #expect {
            try await MCPTestServers.connect("not_mcp.py", ["huge"])
        } throws: { error in
            let error = error as? MCPError
            return error?.kind == .closed && error?.message == "initialize: server \"test\" wrote a message longer than 16777216 bytes"
        }
    }
}
