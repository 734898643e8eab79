import AgentHost
import Testing

struct RuntimeWarmUpTests {
    /// Both pipelines run their whole exchange (the client's response read as not upgrading,
    /// the server's request decoded and its answer encoded), and again: nothing is left
    /// half done (an unfinished promise traps NIO's debug builds when it is freed).
    @Test func theHTTPPipelinesRunTheirExchange() {
        #expect(RuntimeWarmUp.httpPipelines())
        #expect(RuntimeWarmUp.httpPipelines())
    }
}
