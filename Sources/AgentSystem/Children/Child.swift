import CAgentSpawn
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A child started through ``ChildReactor``: its exit is seen by the reactor's one thread (no
/// thread per child) and reported once to every observer; it is signalled only while it is
/// ours (not yet reaped), checked and sent under the lock that also covers the reap.
///
/// Memory: the record and the observers registered before the exit (each called once, then
/// dropped).
public final class Child: Sendable {
    /// How far a signal reaches.
    public enum Scope: Sendable {
        /// The child alone.
        case process
        /// The process group it leads.
        case group
        /// Every process group of the session it leads (jobs a shell put in groups of their
        /// own too); only for ``ChildSpec/Grouping/newSession``.
        case session
    }

    private struct State {
        var life: ChildLife
        var observers: [@Sendable (Int32) -> Void] = []
    }

    public let pid: pid_t
    /// It leads a group (or session) of its own; else every signal reaches it alone.
    private let leadsGroup: Bool
    private let state: Mutex<State>
    private let exit = Latch()

    init(pid: pid_t, reaping: ChildLife.Reaping, leadsGroup: Bool = true) {
        self.pid = pid
        self.leadsGroup = leadsGroup
        state = Mutex(State(life: ChildLife(reaping: reaping)))
    }

    /// The wait status once the exit was seen (nil while it runs).
    public var status: Int32? { state.withLock { $0.life.status } }

    /// Whether its exit was seen.
    public var hasExited: Bool { status != nil }

    /// Where it stands (for tests and diagnostics).
    public var life: ChildLife { state.withLock { $0.life } }

    /// Sends `signal` while the child is ours (running, or exited and not yet reaped: its pid
    /// and group cannot have been reused). True if sent.
    @discardableResult
    public func signal(_ signal: Int32, to scope: Scope = .group) -> Bool {
        state.withLock { s in
            guard s.life.maySignal else { return false }
            switch leadsGroup ? scope : .process {
            case .process: return kill(pid, signal) == 0
            case .group:
                let group = kill(-pid, signal) == 0
                // A child that left its group (setpgid) while members remain in it gets its
                // own; one still in it got the group's (a second would be a second signal).
                guard getpgid(pid) != pid else { return group }
                return kill(pid, signal) == 0 || group
            case .session:
                var groups = SessionMembers.groups(ofSession: pid)
                groups.insert(pid)
                return groups.reduce(false) { sent, group in kill(-group, signal) == 0 || sent }
            }
        }
    }

    /// Calls `body` with the wait status once the child has exited: at once (on this thread)
    /// if it already has, else on the reactor's thread, where it must not block.
    public func onExit(_ body: @escaping @Sendable (Int32) -> Void) {
        let now = state.withLock { s -> Int32? in
            if let status = s.life.status { return status }
            s.observers.append(body)
            return nil
        }
        if let now { body(now) }
    }

    /// Waits for the exit and returns the wait status; nil if the waiting task is cancelled
    /// first.
    public func exited() async -> Int32? {
        await exit.wait()
        return status
    }

    /// Waits at most `bound` for the exit; the wait status, or nil if it still runs. Like
    /// ``exited()``, it ends once the exit is told (the observers have run), not as soon as
    /// the status is read: whoever waited finds what the observers did.
    public func exited(within bound: Duration) async -> Int32? {
        if exit.isOpen { return status }
        _ = await sleep(for: bound, orUntil: { [exit] in await exit.wait() })
        return status
    }

    /// The owner is done with the child (``ChildLife/Reaping/whenReleased``): it is reaped now
    /// if it exited, else as soon as it exits. Signals reach it no more once reaped.
    public func release() {
        state.withLock { s in
            let steps = s.life.release()
            if steps.reap { Self.reap(pid, &s.life) }
        }
    }

    /// `signal` to its group, then SIGKILL if it still runs after `grace`; returns the wait
    /// status, or nil if it had not exited within `bound` of the SIGKILL.
    @discardableResult
    public func terminate(
        _ signal: Int32 = SIGTERM, grace: Duration = .seconds(3), bound: Duration = .seconds(5)
    ) async -> Int32? {
        if let status { return status }
        self.signal(signal)
        if let status = await exited(within: grace) { return status }
        self.signal(SIGKILL)
        return await exited(within: bound)
    }

    // MARK: Reactor side

    /// An exit seen and not yet told: ``deliver()`` tells the observers and opens the waits.
    struct Report {
        let child: Child
        let observers: [@Sendable (Int32) -> Void]

        func deliver() {
            let reported = child.status ?? ChildLife.lostStatus
            for observer in observers { observer(reported) }
            child.exit.open()
        }
    }

    /// The reactor saw the pidfd become readable (or polls a child without one): reads the exit
    /// without reaping, then applies ``ChildLife``'s steps. Nil while it runs; else the report,
    /// which the reactor delivers once it has stopped watching the child (so whoever sees the
    /// exit finds the reactor done with it).
    func checkExit() -> Report? {
        var status: Int32 = 0
        let (observers, known) = state.withLock { s -> ([@Sendable (Int32) -> Void], Bool) in
            guard s.life.phase == .running else { return ([], true) }
            let peeked = agent_peek_exit(pid, &status)
            let steps: ChildLife.Steps
            if peeked == 0 { return ([], false) }
            if peeked < 0 {
                steps = s.life.lost()
                OwnedChildren.forget(pid)
            } else {
                steps = s.life.exitSeen(status: status)
                if steps.reap { Self.reap(pid, &s.life) }
            }
            guard steps.report != nil else { return ([], true) }
            defer { s.observers = [] }
            return (s.observers, true)
        }
        return known ? Report(child: self, observers: observers) : nil
    }

    /// Reaps under the child's lock (waitpid on this pid, never -1) and forgets it in
    /// ``OwnedChildren`` in the same step.
    private static func reap(_ pid: pid_t, _ life: inout ChildLife) {
        if OwnedChildren.reap(pid, wait: true) == nil {
            _ = life.lost()
        } else {
            life.reaped()
        }
    }
}
