#if canImport(Glibc)
import Glibc
#endif

/// The process groups of one session (every process whose session id is the leader's pid),
/// read from `/proc`: what a terminal's hangup reaches, including the jobs an interactive
/// shell puts in groups of their own, which signalling the shell's group alone misses.
///
/// Bounds: those of ``ProcStat/forEachProcess(procRoot:limit:_:)``.
public enum SessionMembers {
    /// The groups (their ids) with a member in session `session`.
    public static func groups(ofSession session: pid_t, procRoot: String = "/proc") -> Set<pid_t> {
        var groups: Set<pid_t> = []
        ProcStat.forEachProcess(procRoot: procRoot) { _, stat in
            if stat.session == session { groups.insert(stat.group) }
            return true
        }
        return groups
    }
}
