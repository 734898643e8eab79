import AgentCore
import Metrics
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The SSH sessions running now, across connections: a cap on them, the count the stats
/// report and the metrics read, and the sessions' processes until they are reaped, which
/// agent shutdown ends (``terminateProcesses(grace:)``).
///
/// Memory: one integer per running session, at most ``maxSessions``, and one pid per
/// session process not yet reaped. A process that ignores the hangup of its client's going
/// outlives its session (as under OpenSSH) and keeps its pid here, and its waiting thread,
/// until it exits or the agent stops.
final class SessionRegistry: Sendable {
    static let defaultMaxSessions = 256
    /// Each running session holds a waiting thread and its process: at most this many.
    let maxSessions: Int
    private struct State {
        var next = 1
        var open: Set<Int> = []
        var processes: Set<pid_t> = []
        /// Set when the agent stops: the grace a process then gets between SIGTERM and SIGKILL.
        var stopping: Duration?
    }
    private let state = Mutex(State())
    private let gauge = Gauge(label: "agent_ssh_sessions")

    init(maxSessions: Int = SessionRegistry.defaultMaxSessions) {
        self.maxSessions = maxSessions
    }

    /// A new session's number, or nil at the cap.
    func open() -> Int? {
        let id: Int? = state.withLock { s in
            guard s.open.count < maxSessions else { return nil }
            let id = s.next
            s.next += 1
            s.open.insert(id)
            return id
        }
        gauge.record(count)
        return id
    }

    func close(_ id: Int) {
        state.withLock { _ = $0.open.remove(id) }
        gauge.record(count)
    }

    var count: Int { state.withLock { $0.open.count } }

    // MARK: Processes

    /// A session's process, from its spawn until ``reaped(_:)``. One tracked after the agent
    /// began to stop (spawned just before, its pid recorded just after the sweep) gets SIGTERM
    /// at once and SIGKILL after the grace, as the others did.
    func track(_ pid: pid_t) {
        let stopping = state.withLock { s in
            s.processes.insert(pid)
            return s.stopping
        }
        guard let grace = stopping else { return }
        OwnedChildren.signalSession(pid, SIGTERM)
        Task.detached { [self] in
            try? await Task.sleep(for: grace)
            // Still tracked: not reaped, so its pid is still this process's.
            if processes.contains(pid) { OwnedChildren.signalSession(pid, SIGKILL) }
        }
    }

    /// The process was reaped: it is no longer the agent's to signal.
    func reaped(_ pid: pid_t) {
        _ = state.withLock { $0.processes.remove(pid) }
    }

    /// Session processes not yet reaped.
    var processes: Set<pid_t> { state.withLock { $0.processes } }

    /// Agent shutdown: SIGTERM to every session process's group, then, for those not reaped
    /// within `grace`, SIGKILL. Only groups of children the agent has not reaped are signalled
    /// (``OwnedChildren/signalSession(_:_:)``: every group of the session, so an interactive
    /// shell's jobs, in groups of their own, too), so a pid reused by another process never is.
    func terminateProcesses(grace: Duration) async {
        let pids = state.withLock { s in
            s.stopping = grace
            return s.processes
        }
        guard !pids.isEmpty else { return }
        for pid in pids { OwnedChildren.signalSession(pid, SIGTERM) }
        let deadline = ContinuousClock.now + grace
        // Polled: reaping happens on each session's own waiting thread.
        while !processes.isEmpty, ContinuousClock.now < deadline {
            do { try await Task.sleep(for: .milliseconds(20)) } catch { break }
        }
        for pid in processes { OwnedChildren.signalSession(pid, SIGKILL) }
    }
}
