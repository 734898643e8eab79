import AgentHTTP
import Testing

struct BindTargetTests {
    @Test func parsesAddresses() throws {
        #expect(try BindTarget(parsing: "127.0.0.1:2114").kind == .tcp(host: "127.0.0.1", port: 2114))
        #expect(try BindTarget(parsing: "[::1]:80").kind == .tcp(host: "::1", port: 80))
        #expect(try BindTarget(parsing: ":9").kind == .tcp(host: "127.0.0.1", port: 9))
        #expect(try BindTarget(parsing: "unix:/tmp/a.sock").kind == .unix(path: "/tmp/a.sock"))
        #expect(try BindTarget(parsing: BindTarget.defaultAddress).isLoopback)
        #expect(try !BindTarget(parsing: "0.0.0.0:1").isLoopback)
    }

    /// The reference's listeners (metrics, debug) read an empty host as Go does: every
    /// interface (`CODER_AGENT_PROMETHEUS_ADDRESS=:2112` to be scraped from outside). The
    /// agent's own HTTP API keeps loopback.
    @Test func anEmptyHostIsEveryInterfaceWhereAsked() throws {
        #expect(try BindTarget(parsing: ":2112", emptyHost: .allInterfaces).kind == .tcp(host: "0.0.0.0", port: 2112))
        #expect(try !BindTarget(parsing: ":2112", emptyHost: .allInterfaces).isLoopback)
        #expect(try BindTarget(parsing: "127.0.0.1:2112", emptyHost: .allInterfaces).kind == .tcp(host: "127.0.0.1", port: 2112))
    }

    @Test func rejectsBadAddresses() {
        for bad in ["", "nohost", "1.2.3.4:", "1.2.3.4:70000", "::1:80", "[::1]80", "unix:", "host:port"] {
            #expect(throws: BindTargetError.self, "\(bad)") { try BindTarget(parsing: bad) }
        }
    }
}
