import AgentTestSupport
import Testing

/// The raw test client against a port nothing listens on (a server that just died): the
/// request fails with the connect's error, and the client's own promise is failed too, not
/// dropped uncompleted (NIO's debug builds trap on that, which once ended a whole test run
/// after an agent under test crashed).
@Suite struct RawHTTPClientRefusedTests {
    @Test func aRefusedConnectFailsTheRequestAndLeaksNothing() async throws {
        let port = freeLoopbackPort()
        for _ in 0..<3 {
            await #expect(throws: (any Error).self) { _ = try await RawHTTPClient(port: port).request("GET", "/healthz") }
        }
    }
}
