import AgentCore
import Synchronization

/// An upward sink that keeps the connection reports it is given (SSH, the reconnecting PTY)
/// and settles everything else at once.
public final class ReportRecorder: UpwardSink, Sendable {
    private let reports = Mutex<[ConnectionReport]>([])

    public init() {}

    public var all: [ConnectionReport] { reports.withLock { $0 } }
    public func send(_ status: AppStatusReport) -> UpwardReceipt { .settled(.logged) }
    public func send(_ batch: BoundaryLogBatch) -> UpwardReceipt { .settled(.logged) }
    public func send(_ line: AgentLogLine) {}
    public func send(_ report: ConnectionReport) { reports.withLock { $0.append(report) } }
    public var isConnected: Bool { false }
    public var hasControlPlane: Bool { false }
}
