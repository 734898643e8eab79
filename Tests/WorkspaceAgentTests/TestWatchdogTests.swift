import AgentTestSupport
import CTestWatchdog
import Foundation
import Testing

/// The test process's watchdog (Tests/CTestWatchdog): a test that never ends, even after its
/// time limit cancelled it, no longer holds the run until CI's own deadline. Run here in a
/// second test process with a 20 s limit (the binary loads and finds its tests within it,
/// even on a busy host).
@Suite(.timeLimit(.minutes(3)))
struct TestWatchdogTests {
    static let holdVariable = "AGENT_TEST_WATCHDOG_HOLD"

    @Test func aTestThatNeverEndsEndsItsProcessAndThoseUnderIt() async throws {
        let marker = NSTemporaryDirectory() + "watchdog-child-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: marker) }
        let binary = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        // `timeout`: a watchdog that did not fire must not hold this test either.
        let outcome = await ChildProgram.run(
            ["timeout", "-s", "KILL", "120", binary, "--testing-library", "swift-testing", "--filter", "holdsTheRunForEver"],
            environment: ["AGENT_TEST_RUN_LIMIT_SECONDS": "20", Self.holdVariable: marker], stderrToStdout: true)
        #expect(outcome.status == 124, "\(outcome.stdout)")
        #expect(outcome.stdout.contains("test watchdog: the test process ran past its 20 s"))
        // The held test's own child ended with it (the same process: its pid and start time).
        let fields = try String(contentsOfFile: marker, encoding: .utf8).split(separator: " ")
        let pid = try #require(fields.first.flatMap { pid_t($0) })
        let started = try #require(fields.last.flatMap { UInt64($0) })
        #expect(await eventually { ProcessInstance(pid).map { $0.startTime != started || $0.hasEnded } ?? true })
    }

    /// Only in the process the test above starts: a child of its own, then a wait that
    /// cancellation does not reach.
    @Test(.enabled(if: ProcessInfo.processInfo.environment[holdVariable] != nil))
    func holdsTheRunForEver() async throws {
        #expect(agent_test_watchdog_limit() == 20)
        let sleeper = Process()
        sleeper.executableURL = URL(fileURLWithPath: "/bin/sleep")
        sleeper.arguments = ["600"]
        try sleeper.run()
        let marker = try #require(ProcessInfo.processInfo.environment[Self.holdVariable])
        let sleeping = try #require(ProcessInstance(sleeper.processIdentifier))
        try "\(sleeping.pid) \(sleeping.startTime)".write(toFile: marker, atomically: true, encoding: .utf8)
        await withCheckedContinuation { (_: CheckedContinuation<Void, Never>) in }
    }
}
