import AgentSystem
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `/proc/<pid>/stat`'s fields as the agent reads them: after the command name's last `)`,
/// whatever the name holds.
@Suite struct ProcStatTests {
    @Test func fieldsAfterTheLastParenthesis() throws {
        let stat = try #require(ProcStat(statLine: Array("4242 (a) b) (c d) S 17 4242 4000 34816 4242 4194560".utf8)))
        #expect(stat == ProcStat(statLine: Array("1 (x) S 17 4242 4000".utf8)))
        #expect(stat.state == UInt8(ascii: "S") && stat.parent == 17 && stat.group == 4242 && stat.session == 4000)
        #expect(ProcStat(statLine: Array("5 (z) Z 1 5 5".utf8))?.isDead == true)
        #expect(ProcStat(statLine: Array("5 (cut".utf8)) == nil)
        #expect(ProcStat(statLine: Array("5 (x) S 1 nan 3".utf8)) == nil)
    }

    @Test func thisProcessAndTheWalk() throws {
        let own = try #require(ProcStat.read(getpid()))
        #expect(own.parent == getppid() && own.group == getpgrp() && own.session == getsid(0))
        var sawSelf = false
        ProcStat.forEachProcess { pid, _ in
            sawSelf = sawSelf || pid == getpid()
            return !sawSelf
        }
        #expect(sawSelf)
        #expect(SessionMembers.groups(ofSession: getsid(0)).contains(getpgrp()))
    }
}
