/// One counter or gauge sample of the agent's own metrics, as `UpdateStats` carries it.
public struct MetricSample: Sendable, Equatable {
    public enum Kind: Int, Sendable, Equatable {
        case counter = 1
        case gauge = 2
    }

    public var name: String
    public var kind: Kind
    public var value: Double
    /// Label names and values, in the order the backend wrote them.
    public var labels: [(name: String, value: String)]

    public init(name: String, kind: Kind, value: Double, labels: [(name: String, value: String)] = []) {
        self.name = name
        self.kind = kind
        self.value = value
        self.labels = labels
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.name == rhs.name && lhs.kind == rhs.kind && lhs.value == rhs.value
            && lhs.labels.map(\.name) == rhs.labels.map(\.name) && lhs.labels.map(\.value) == rhs.labels.map(\.value)
    }
}

/// Reads the agent's counters and gauges (the executable knows the metrics backend; modules
/// only read through this).
public protocol MetricsSnapshotSource: Sendable {
    /// Every counter and gauge now; other kinds (histograms, summaries) are left out.
    func samples() -> [MetricSample]
}

/// No metrics (tests, tools).
public struct NoMetricsSnapshot: MetricsSnapshotSource {
    public init() {}
    public func samples() -> [MetricSample] { [] }
}
