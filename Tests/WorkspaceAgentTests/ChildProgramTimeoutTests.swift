import AgentTestSupport
import Foundation
import Testing

/// The tests' own child programs are bounded in time (``ChildProgram/defaultTimeout``): a
/// client the code under test leaves waiting ends, with a status and a line that say so,
/// instead of holding the run where a test's time limit does not reach.
@Suite(.timeLimit(.minutes(3)))
struct ChildProgramTimeoutTests {
    @Test func aChildThatNeverEndsIsKilledAtItsTimeout() async {
        let outcome = await ChildProgram.run(["sh", "-c", "echo started; exec sleep 600"], timeout: .seconds(5))
        #expect(outcome.status == 128 + SIGKILL)
        #expect(outcome.stdout.hasPrefix("started\n"))
        #expect(outcome.stdout.contains("[ChildProgram: sh ran past its 5.0 seconds and was killed]"))
    }

    /// The child ended, but a process it left behind holds its output open.
    @Test func outputHeldOpenByAGrandchildEndsAtTheTimeout() async {
        let outcome = await ChildProgram.run(["sh", "-c", "sleep 30 & echo started"], timeout: .seconds(5))
        #expect(outcome.status == 0)
        #expect(outcome.stdout.hasPrefix("started\n"))
        #expect(outcome.stdout.contains("its output was still open after 5.0 seconds"))
    }

    @Test func aChildThatEndsInTimeIsUntouched() async {
        let outcome = await ChildProgram.run(["sh", "-c", "echo done; exit 3"], timeout: .seconds(60))
        #expect(outcome.status == 3)
        #expect(outcome.stdout == "done\n")
    }
}
