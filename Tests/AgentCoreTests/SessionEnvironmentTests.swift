import AgentCore
import Testing

/// The seam the desktop publishes its DISPLAY through and the process API reads.
struct SessionEnvironmentTests {
    @Test func ownersSetAndWithdrawTheirVariables() {
        let sessions = SessionEnvironment()
        #expect(sessions.current == SessionEnvironment.Snapshot(generation: 0, variables: [:]))
        sessions.set(["DISPLAY": ":10"], for: "desktop")
        let started = sessions.current
        #expect(started.variables == ["DISPLAY": ":10"] && started.generation != 0)
        sessions.set(["OTHER": "1"], for: "other")
        #expect(sessions.current.variables == ["DISPLAY": ":10", "OTHER": "1"])
        sessions.set([:], for: "desktop")
        #expect(sessions.current.variables == ["OTHER": "1"])
        sessions.set([:], for: "other")
        #expect(sessions.current.variables == [:])
    }

    /// The generation moves only when the variables change (equal generations let a process
    /// start reuse the environment it built).
    @Test func theGenerationMovesOnlyOnAChange() {
        let sessions = SessionEnvironment()
        sessions.set(["DISPLAY": ":10"], for: "desktop")
        let first = sessions.current.generation
        sessions.set(["DISPLAY": ":10"], for: "desktop")
        sessions.set([:], for: "nobody")
        #expect(sessions.current.generation == first)
        sessions.set(["DISPLAY": ":11"], for: "desktop")
        #expect(sessions.current.generation != first)
    }
}
