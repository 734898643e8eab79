import AgentSystem
import Testing

/// What a client's `env` requests can and cannot set in a session.
struct SessionVariablesTests {
    @Test func aClientCannotReplaceOrSmuggleVariables() {
        let environment = SessionVariables.base(
            agent: ["PATH": "/usr/bin:/bin", "HOME": "/root"],
            client: [
                ("USER", "mallory"), ("LOGNAME", "mallory"), ("PATH=/tmp/evil", "x"), ("HOME", "/tmp/evil"), ("", "empty"),
                ("NUL\u{0}NAME", "v"), ("CUT", "a\u{0}b"), ("CLIENT_VAR", "client"),
            ],
            manifest: ["CODER": "true"], user: "root", shell: "/bin/sh")
        #expect(environment["USER"] == "root" && environment["LOGNAME"] == "root", "the reference sets them after the client's")
        #expect(environment["PATH"] == "/usr/bin:/bin" && environment["HOME"] == "/root")
        #expect(environment["CLIENT_VAR"] == "client" && environment["CODER"] == "true")
        #expect(!environment.keys.contains { $0.isEmpty || $0.contains("=") || $0.utf8.contains(0) }, "\(environment.keys.sorted())")
        #expect(environment["CUT"] == nil)
    }
}
