import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The agent's direct children that a module started and waits for itself (process-API
/// shells, the desktop's programs, the manifest's scripts), process-wide.
///
/// With the agent as child subreaper, the process API adopts and reaps every child of the
/// agent that it does not know: an orphaned grandchild. A child another module owns must
/// never be taken for one (its exit status would be stolen, and at shutdown it would be
/// signalled), so every module registers its children here from before the spawn (a spawn
/// under way holds scans off) until it has reaped them (reaped and forgotten in one step,
/// so that a new child that gets the same pid is never forgotten by mistake).
///
/// Memory: one entry per live owned child.
public enum OwnedChildren {
    private struct State {
        var pids: Set<pid_t> = []
        var spawning = 0
    }
    private static let state = Mutex(State())

    /// Runs `spawn` (which returns the new child's pid, or throws) and records the child,
    /// counting the spawn as under way meanwhile. The lock is not held across the spawn.
    public static func spawning<E: Error>(_ spawn: () throws(E) -> pid_t) throws(E) -> pid_t {
        state.withLock { $0.spawning += 1 }
        do {
            let pid = try spawn()
            state.withLock { s in
                s.spawning -= 1
                if pid > 0 { s.pids.insert(pid) }
            }
            return pid
        } catch {
            state.withLock { $0.spawning -= 1 }
            throw error
        }
    }

    /// Reaps `pid` (blocking until it has exited when `wait`) and forgets it, in one step.
    /// Returns the wait status, or nil when it had not exited (`wait` false) or was not ours.
    @discardableResult
    public static func reap(_ pid: pid_t, wait: Bool = false) -> Int32? {
        state.withLock { s in
            var status: Int32 = 0
            var result: pid_t
            repeat { result = waitpid(pid, &status, wait ? 0 : WNOHANG) } while result < 0 && errno == EINTR
            if result == pid || result < 0 { s.pids.remove(pid) }
            return result == pid ? status : nil
        }
    }

    /// Forgets `pid` without reaping it (someone else reaped it).
    public static func forget(_ pid: pid_t) {
        _ = state.withLock { $0.pids.remove(pid) }
    }

    /// `children()` minus the owned ones, read under the lock so that a spawn cannot register
    /// its child in between; nil while a spawn is under way (try again shortly).
    public static func unowned(of children: () -> [pid_t]) -> [pid_t]? {
        state.withLock { s in
            guard s.spawning == 0 else { return nil }
            return children().filter { !s.pids.contains($0) }
        }
    }

    /// Sends `signal` to `pid` (its process group with `group`) only while it is an owned
    /// child not yet reaped, checked and sent under the lock (so a reaped pid, which the
    /// kernel may have given to another process, is never signalled). True if sent.
    @discardableResult
    public static func signal(_ pid: pid_t, _ signal: Int32, group: Bool = false) -> Bool {
        state.withLock { s in
            guard s.pids.contains(pid) else { return false }
            return kill(group ? -pid : pid, signal) == 0
        }
    }

    /// Sends `signal` to every process group of the session `leader` leads (``SessionMembers``)
    /// while `leader` is an owned child not yet reaped: its pid, hence the session id, cannot
    /// be reused meanwhile, and a group id stays taken while the group has a member, so only
    /// the session's own groups are reached (a group that empties between the scan and the
    /// signal could be taken again only after the pid counter wraps). Returns how many groups.
    @discardableResult
    public static func signalSession(_ leader: pid_t, _ signal: Int32) -> Int {
        state.withLock { s in
            guard s.pids.contains(leader) else { return 0 }
            var groups = SessionMembers.groups(ofSession: leader)
            groups.insert(leader)
            return groups.reduce(0) { $0 + (kill(-$1, signal) == 0 ? 1 : 0) }
        }
    }

    /// Whether `pid` is an owned child.
    public static func owns(_ pid: pid_t) -> Bool { state.withLock { $0.pids.contains(pid) } }
}
