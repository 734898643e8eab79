/// The agent's lifecycle states, with the wire values of `coder.agent.v2.Lifecycle.State`
/// (AgentCore carries no protobuf). The order is the only order states may be reported in.
public enum AgentLifecycleState: Int, Sendable, Comparable, CaseIterable, CustomStringConvertible {
    case created = 1
    case starting = 2
    case startTimeout = 3
    case startError = 4
    case ready = 5
    case shuttingDown = 6
    case shutdownTimeout = 7
    case shutdownError = 8
    case off = 9

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The reference's text form (`start_timeout`).
    public var description: String {
        switch self {
        case .created: "created"
        case .starting: "starting"
        case .startTimeout: "start_timeout"
        case .startError: "start_error"
        case .ready: "ready"
        case .shuttingDown: "shutting_down"
        case .shutdownTimeout: "shutdown_timeout"
        case .shutdownError: "shutdown_error"
        case .off: "off"
        }
    }

    /// A final state of the shutdown (OFF, SHUTDOWN_TIMEOUT, SHUTDOWN_ERROR).
    public var isFinal: Bool { self >= .shutdownTimeout }
}

/// Where the module that owns the start and stop outcomes (the manifest's scripts) reports
/// lifecycle states. States only move forward: one that is not later than the last is
/// refused (false); each accepted state is delivered once, in order, across reconnects.
public protocol LifecycleReporter: Sendable {
    @discardableResult
    func report(_ state: AgentLifecycleState) -> Bool
    /// The last state accepted.
    var currentLifecycle: AgentLifecycleState { get }
}

/// A reporter that remembers and forwards nothing (tests, tools without a control plane).
public struct NoLifecycleReporter: LifecycleReporter {
    public init() {}
    public func report(_ state: AgentLifecycleState) -> Bool { true }
    public var currentLifecycle: AgentLifecycleState { .created }
}
