/// Work that lives on the upward session: started on each connected session with the
/// control plane, stopped when it drops, started again on the next one.
///
/// The tailnet's coordination (a bidirectional stream) and its DERP map (a server stream)
/// are such work: they need the live connection, not a queue that survives it (for that,
/// ``UpwardSink``). A module declares its participants in ``AgentModule/upwardParticipants``;
/// the host registers them in ``UpwardParticipants`` and the control-plane session runs them.
/// Standalone (no control plane), no participant ever starts.
public protocol UpwardParticipant: Sendable {
    /// Shown in logs ("tailnet coordination").
    var name: String { get }

    /// Runs on one connected session: opens the streams it needs on `session` and works with
    /// them. It is started once the session has fetched its manifest and reported start-up.
    ///
    /// When the session drops, or the agent shuts down, the task running this is cancelled
    /// and every stream it opened is reset (pending receives and sends throw); it must then
    /// return promptly (the session waits for it before it reconnects). Returning or throwing
    /// early ends it for this session only (a throw is logged); streams it left open are
    /// closed (what it sent still arrives); it starts again with the next session. Messages
    /// are bytes (serialized protobufs): AgentCore knows no protobuf.
    func run(on session: any UpwardSession) async throws

    /// At shutdown, once the session's own queues are empty, it waits for this before it
    /// closes (within its shutdown deadline): returns when what the participant still has to
    /// send upward (stop scripts' logs and reports) is sent, or can never be. The default
    /// returns at once.
    func drained() async
}

extension UpwardParticipant {
    public func drained() async {}
}
