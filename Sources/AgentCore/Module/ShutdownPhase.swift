/// When a module's service stops during the agent's graceful shutdown.
///
/// The host stops the phases in this order, one after the other; a phase begins when every
/// service of the phase before it has returned from `run()`. Within a phase, services stop
/// in the reverse of the order their modules were added. The whole sequence fits in the
/// host's shutdown bound (7 s in the daemon, plus what stop scripts are allowed), which ends the agent whatever a phase does.
public enum ShutdownPhase: Int, CaseIterable, Comparable, Sendable, CustomStringConvertible {
    /// Stops first and returns at once: tells the world the agent is going (the lifecycle
    /// state SHUTTING_DOWN goes up, the HTTP server stops taking new connections) and arms
    /// the deadlines of the later phases.
    case announce
    /// The workspace's own shutdown work: the manifest's `run_on_stop` scripts run while
    /// the agent socket still serves them (`exp sync`, app status); the phase
    /// ends when they have ended. The host's bound grows by what they may take
    /// (``ShutdownClock/allow(_:)``).
    case scripts
    /// The work the agent owns ends: process groups are terminated (which also ends the
    /// `wait=true` requests and streams that watch them), sockets the agent created are
    /// removed, watchers stop. Must finish before the final reports, so that they are final.
    case work
    /// The final lifecycle states (SHUTTING_DOWN, OFF) and queued reports go up, then the
    /// control-plane connection closes.
    case upward
    /// Stops last: the HTTP listeners close once the answers the earlier phases released
    /// are out. It comes after `upward`, not before, so that a client holding a half-sent
    /// request cannot delay the final OFF report (its connection is closed at the bound).
    case serving

    public static func < (lhs: ShutdownPhase, rhs: ShutdownPhase) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String {
        switch self {
        case .announce: "announce"
        case .scripts: "scripts"
        case .work: "work"
        case .upward: "upward"
        case .serving: "serving"
        }
    }
}
