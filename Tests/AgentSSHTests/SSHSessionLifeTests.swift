import Testing

@testable import AgentSSH

/// ``SSHSessionLife`` alone: when a session finishes, drains its terminal, hangs its process up.
struct SSHSessionLifeTests {
    @Test func aCommandFinishesOnceItExitedAndBothOutputsEnded() {
        var life = SSHSessionLife()
        life.processStarted(terminal: false)
        #expect(life.outputAttached().isEmpty)
        #expect(life.outputAttached().isEmpty)
        #expect(life.outputEnded().isEmpty)
        #expect(life.processExited(status: 3 << 8).isEmpty, "stderr is still open")
        #expect(life.outputEnded() == [.finish(status: 3 << 8)])
        #expect(life.ended)
        #expect(life.outputEnded().isEmpty, "finished once")
        #expect(life.channelClosed().isEmpty, "no hang-up after the exit")
    }

    @Test func outputEndingFirstWaitsForTheExit() {
        var life = SSHSessionLife()
        life.processStarted(terminal: false)
        _ = life.outputEnded()
        #expect(life.outputEnded().isEmpty)
        #expect(life.processExited(status: 0) == [.finish(status: 0)])
    }

    @Test func aTerminalHeldByABackgroundJobDrainsThenFinishes() {
        var life = SSHSessionLife()
        life.processStarted(terminal: true)
        _ = life.outputAttached()
        #expect(life.processExited(status: 0) == [.scheduleDrain])
        #expect(life.drainDue() == [.drainTerminal, .finish(status: 0)])
        #expect(life.drainDue().isEmpty)
    }

    @Test func aTerminalAttachedAfterTheExitDrainsFromThen() {
        var life = SSHSessionLife()
        life.processStarted(terminal: true)
        #expect(life.processExited(status: 9).isEmpty, "no relay yet")
        #expect(life.outputAttached() == [.scheduleDrain])
        #expect(life.outputEnded() == [.finish(status: 9)])
        #expect(life.drainDue().isEmpty, "already finished")
    }

    @Test func theClientGoingFirstHangsTheProcessUp() {
        var life = SSHSessionLife()
        life.processStarted(terminal: true)
        #expect(life.channelClosed() == [.hangUp])
        #expect(life.ended)
        #expect(life.processExited(status: 1).isEmpty)
    }

    @Test func aSessionWithoutAProcessFinishesWithItsOwnStatus() {
        var life = SSHSessionLife()
        life.endWithoutProcess(status: 65 << 8)
        #expect(life.drainDue() == [.finish(status: 65 << 8)])
        #expect(life.channelClosed().isEmpty, "nothing to hang up")
        var never = SSHSessionLife()
        #expect(never.channelClosed().isEmpty)
    }
}
