import AgentCore
import AgentTestSupport
import Testing

@testable import MCPEngine

/// Answers whose head arrives and whose body never does (`not_mcp_http.py
/// json-stalled-bodies`: `Content-Length: 10`, then nothing, the connection held open).
/// The request's deadline ends with the head, so each body read carries its own: the
/// DELETE of a closing session gives up at its 5 s, and a notification's answer at the
/// connect timeout, giving its exchange back. Plain Python, cheap to start: these run side by
/// side.
@Suite(.timeLimit(.minutes(5)))
struct MCPHTTPStalledBodyTests {
    @Test func closeReturnsWhenTheAnswerToItsDeleteStalls() async throws {
        let server = try await MCPHTTPTestServer.start("not_mcp_http.py", ["json-stalled-bodies"])
        let session = try await MCPTestServers.connect(.streamableHTTP(url: server.url("/mcp"), headers: [:]))
        let closed = TestFlag()
        let closing = Task {
            await session.close()
            closed.set()
        }
        // The DELETE waits at most 5 s, its body included; before, close() never returned.
        await closed.wait(upTo: .seconds(30))
        #expect(closed.isSet, "close() did not return")
        // The server's log line is read from its output as it comes: waited for, not sampled.
        #expect(await eventually { server.log.all.contains { $0.line == "STALLED DELETE" } })
        // The server's end closes the connection, which lets a close() that hung return too.
        await server.close()
        await closing.value
    }

    @Test func aNotificationWhoseAnswerStallsGivesItsExchangeBack() async throws {
        let server = try await MCPHTTPTestServer.start("not_mcp_http.py", ["json-stalled-bodies"])
        let transport = try MCPStreamableHTTPTransport(
            serverName: "test", url: server.url("/mcp"), headers: [:], connectTimeout: .seconds(5), budget: MCPMemoryBudget(),
            log: { _, _ in }, events: { _ in })
        let note = JSONRPCMessage.notification(method: "notifications/progress", params: nil)
        // Every exchange a server may have at once, each answered with a head and no body.
        for _ in 0..<MCPHTTPExchanges.maxInFlight { try transport.send(note) }
        #expect(await eventually { server.log.all.filter { $0.line == "STALLED notifications/progress" }.count == MCPHTTPExchanges.maxInFlight })
        // At the connect timeout the bodies are given up and the exchanges come back; before,
        // they were held for good and every later send was refused.
        #expect(await eventually { (try? transport.send(note)) != nil })
        await transport.close()
        await server.close()
    }
}
