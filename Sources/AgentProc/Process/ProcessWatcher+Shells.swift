import AgentCore

#if canImport(Glibc)
import Glibc
#endif

/// The shells the reactor watches: registered while spawned, reaped and forgotten in one step.
extension ProcessReactor {
    /// Runs `spawn` and records the new shell, counting the spawn as under way meanwhile so
    /// that no scan mistakes the child for an orphan. (The lock is not held across the
    /// spawn: a `chdir` stuck on a hung mount must not block the reactor.)
    static func registeringShell(_ spawn: () throws(SpawnError) -> SpawnedChild) throws(SpawnError) -> SpawnedChild {
        var child: SpawnedChild?
        _ = try OwnedChildren.spawning { () throws(SpawnError) -> pid_t in
            child = try spawn()
            return child!.pid
        }
        return child!
    }

    /// Reaps a shell and forgets it in one step, so that a new shell that gets the same pid
    /// is never forgotten by mistake.
    static func reapShell(_ pid: pid_t) {
        OwnedChildren.reap(pid)
    }

    /// A shell that could not be watched (the reactor had stopped): kill, reap, forget.
    static func discardShell(_ pid: pid_t) {
        kill(-pid, SIGKILL)
        OwnedChildren.reap(pid, wait: true)
    }
}
