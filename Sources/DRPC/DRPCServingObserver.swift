/// What ``DRPCServer/serve(_:observer:)`` tells about its connection as it decodes it, for a
/// server that bounds its clients (the agent socket: a frame begun must end in time, a
/// connection in a call is never evicted). The decoder answers; nothing re-parses the bytes.
///
/// Called from the serving task and, for a streaming call's end, from that call's task:
/// implementations must be safe to call from both.
public protocol DRPCServingObserver: Sendable {
    /// Once every packet the bytes so far hold was handled, before the next read: whether
    /// they end inside a frame (``DRPCPacketReader/isMidFrame``), and whether a frame was
    /// completed since the last report (a frame ended and the next began: its own deadline).
    func decoded(midFrame: Bool, endedAFrame: Bool)
    /// A call began (an Invoke was read: `true`) or ended (its answer or error was sent, or
    /// the client closed or cancelled it: `false`). One call at a time per transport.
    func call(inProgress: Bool)
}
