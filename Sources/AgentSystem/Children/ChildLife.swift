/// The exit bookkeeping of one child, without I/O: when its exit is reported (exactly once),
/// when it is reaped, and whether it may still be signalled. ``Child`` applies the steps under
/// its lock; unit tests drive the value alone.
///
/// A child stays signallable until it is reaped: an exited child not yet reaped is a zombie,
/// so its pid (and the group or session it leads) cannot be handed to another process.
public struct ChildLife: Sendable, Equatable {
    /// When the exited child is reaped.
    public enum Reaping: Sendable, Equatable {
        /// As soon as its exit is seen (its group is never signalled after that).
        case atExit
        /// Only once ``release()`` is called: the owner keeps the zombie, hence its group,
        /// until it is done with them (a script's run, an MCP server's shutdown).
        case whenReleased
    }

    public enum Phase: Sendable, Equatable {
        case running
        /// Exited, not reaped: still ours to signal.
        case exited(status: Int32)
        /// Reaped: the pid may belong to another process now.
        case reaped(status: Int32)
        /// Reaped by someone else (ECHILD): no status, never signalled again.
        case lost
    }

    /// What the owner must do after a step.
    public struct Steps: Sendable, Equatable {
        /// Call `waitpid(pid)` now (then ``reaped()``).
        public var reap = false
        /// Report this wait status to the observers (happens once per child).
        public var report: Int32?

        public init(reap: Bool = false, report: Int32? = nil) {
            self.reap = reap
            self.report = report
        }
    }

    /// What a lost child reports: exit code 255, as a process that failed.
    public static let lostStatus: Int32 = 0xff00

    public let reaping: Reaping
    public private(set) var phase: Phase = .running
    /// ``release()`` was called.
    public private(set) var released = false

    public init(reaping: Reaping) {
        self.reaping = reaping
    }

    /// The child's exit was seen (without reaping it), with its wait status.
    public mutating func exitSeen(status: Int32) -> Steps {
        guard phase == .running else { return Steps() }
        phase = .exited(status: status)
        return Steps(reap: reaping == .atExit || released, report: status)
    }

    /// The owner is done with the child: reap it now if it exited, else as soon as it does.
    public mutating func release() -> Steps {
        released = true
        if case .exited = phase { return Steps(reap: true) }
        return Steps()
    }

    /// The child was reaped (`waitpid` returned it).
    public mutating func reaped() {
        if case .exited(let status) = phase { phase = .reaped(status: status) }
    }

    /// The child is gone without us reaping it (ECHILD); reports a failure if nothing was
    /// reported yet.
    public mutating func lost() -> Steps {
        switch phase {
        case .running:
            phase = .lost
            return Steps(report: Self.lostStatus)
        case .exited:
            phase = .lost
            return Steps()
        case .reaped, .lost:
            return Steps()
        }
    }

    /// Whether its pid (and the group or session it leads) is still ours to signal.
    public var maySignal: Bool {
        switch phase {
        case .running, .exited: true
        case .reaped, .lost: false
        }
    }

    /// The wait status once its exit was seen.
    public var status: Int32? {
        switch phase {
        case .running: nil
        case .exited(let status), .reaped(let status): status
        case .lost: Self.lostStatus
        }
    }
}
