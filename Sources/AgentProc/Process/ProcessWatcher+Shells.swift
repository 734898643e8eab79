import AgentCore

#if canImport(Glibc)
import Glibc
#endif

/// The shells the watcher watches (registered in ``OwnedChildren`` by their spawn,
/// ``ChildReactor/startUnwatched(_:)``): reaped and forgotten in one step.
extension ProcessWatcher {
    /// Reaps a shell and forgets it in one step, so that a new shell that gets the same pid
    /// is never forgotten by mistake.
    static func reapShell(_ pid: pid_t) {
        OwnedChildren.reap(pid)
    }

    /// A shell that could not be watched (the watcher had stopped): kill, reap, forget.
    static func discardShell(_ pid: pid_t) {
        kill(-pid, SIGKILL)
        OwnedChildren.reap(pid, wait: true)
    }
}
