/// An upward sink that sends nothing and says it is standalone: for running the agent's
/// code without a control plane and without a log (tests, fuzz targets).
public struct DiscardingUpward: UpwardSink {
    public init() {}
    public func send(_ status: AppStatusReport) -> UpwardReceipt { .settled(.logged) }
    public func send(_ batch: BoundaryLogBatch) -> UpwardReceipt { .settled(.logged) }
    public func send(_ line: AgentLogLine) {}
    public func send(_ report: ConnectionReport) {}
    public var isConnected: Bool { false }
    public var hasControlPlane: Bool { false }
}
