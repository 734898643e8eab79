/// A capability as the agent's host sees it: its long-running services and the phase in
/// which each stops. Modules that serve HTTP refine this with `HTTPModule` (AgentHTTP).
///
/// A module is built by the executable from its configuration and an ``AgentContext``; it
/// never imports another capability module. Adding one to the agent is one line of wiring.
public protocol AgentModule: Sendable {
    /// Shown in logs.
    var name: String { get }
    /// Long-running work; started together when the agent starts.
    var services: [ModuleService] { get }
    /// Work that lives on the upward session (``UpwardParticipant``): started on each
    /// connected session with the control plane, stopped when it drops. The host registers
    /// them in its ``UpwardParticipants`` when the module is added.
    var upwardParticipants: [any UpwardParticipant] { get }
    /// The last resort when shutdown overran its bound: end at once what the module owns
    /// that would outlive the agent (SIGKILL to process groups). Runs on the watchdog
    /// thread, so it must never block or wait for a lock another thread may hold forever.
    func terminateNow()
}

extension AgentModule {
    public var services: [ModuleService] { [] }
    public var upwardParticipants: [any UpwardParticipant] { [] }
    public func terminateNow() {}
}
