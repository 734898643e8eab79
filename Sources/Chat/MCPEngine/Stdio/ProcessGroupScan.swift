import AgentCore

#if canImport(Glibc)
import Glibc
#endif

/// Whether a process group still has live members besides its leader, read from `/proc`:
/// what a stdio server's thread asks after the server (the group's leader) exited, to know
/// whether the descendants it left in its group need signalling and when they are gone.
///
/// Zombies do not count (they are dead; their parent reaps them). Cost: one pass over
/// `/proc` (``ProcStat/forEachProcess(procRoot:limit:_:)``); no memory kept.
enum ProcessGroupScan {
    /// Whether any process other than `leader` is alive in process group `group`.
    static func hasOtherMembers(group: pid_t, leader: pid_t) -> Bool {
        var found = false
        ProcStat.forEachProcess { pid, stat in
            found = pid != leader && stat.group == group && !stat.isDead
            return !found
        }
        return found
    }
}
