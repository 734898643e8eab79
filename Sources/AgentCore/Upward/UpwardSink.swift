/// Where modules send what goes up to the control plane, without knowing how it travels.
///
/// The control-plane session implements it (bounded, ordered outboxes that survive
/// reconnects); the executable hands it to modules in their ``AgentContext``. No call
/// blocks. Standalone (no control plane), items are written to the agent's log instead.
public protocol UpwardSink: Sendable {
    /// Queues an app status report (UpdateAppStatus).
    @discardableResult
    func send(_ status: AppStatusReport) -> UpwardReceipt
    /// Queues a batch of boundary audit logs (ReportBoundaryLogs).
    @discardableResult
    func send(_ batch: BoundaryLogBatch) -> UpwardReceipt
    /// Queues one of the agent's own log lines (BatchCreateLogs); no receipt, as nobody
    /// waits on a log line.
    func send(_ line: AgentLogLine)
    /// Queues an SSH or terminal connection's start or end (ReportConnection); no receipt:
    /// the reference drops what it cannot send, with a warning.
    func send(_ report: ConnectionReport)
    /// True while a control-plane connection is up (false standalone): a caller can tell
    /// its client "queued" rather than "sent".
    var isConnected: Bool { get }
    /// False when the agent runs standalone: items are only written to its log.
    var hasControlPlane: Bool { get }
}
