import AgentSystem
import Testing

/// ``ChildLife`` alone: when an exit is reported, when a child is reaped, when it may be
/// signalled.
struct ChildLifeTests {
    @Test func anExitIsReportedOnceAndReapedAtOnceByDefault() {
        var life = ChildLife(reaping: .atExit)
        #expect(life.maySignal)
        let first = life.exitSeen(status: 0x100)
        #expect(first == ChildLife.Steps(reap: true, report: 0x100))
        #expect(life.maySignal, "a zombie is still ours until the reap")
        life.reaped()
        #expect(life.phase == .reaped(status: 0x100))
        #expect(!life.maySignal)
        let again = life.exitSeen(status: 0)
        #expect(again == ChildLife.Steps())
        #expect(life.status == 0x100)
    }

    @Test func aHeldChildIsReapedOnlyWhenReleased() {
        var life = ChildLife(reaping: .whenReleased)
        let exit = life.exitSeen(status: 9)
        #expect(exit == ChildLife.Steps(reap: false, report: 9))
        #expect(life.phase == .exited(status: 9))
        #expect(life.maySignal, "its group stays ours while the zombie is kept")
        let release = life.release()
        #expect(release.reap)
        life.reaped()
        #expect(!life.maySignal)
    }

    @Test func releasedBeforeTheExitIsReapedAtTheExit() {
        var life = ChildLife(reaping: .whenReleased)
        let early = life.release()
        #expect(!early.reap)
        let exit = life.exitSeen(status: 0)
        #expect(exit == ChildLife.Steps(reap: true, report: 0))
    }

    @Test func aChildSomeoneElseReapedReportsAFailureOnceAndIsNeverSignalled() {
        var life = ChildLife(reaping: .atExit)
        let lost = life.lost()
        #expect(lost.report == ChildLife.lostStatus)
        #expect(!life.maySignal)
        let again = life.lost()
        #expect(again == ChildLife.Steps())
        var exited = ChildLife(reaping: .whenReleased)
        _ = exited.exitSeen(status: 0)
        let afterExit = exited.lost()
        #expect(afterExit.report == nil, "its exit was already reported")
        #expect(!exited.maySignal)
    }
}
