import AgentCore

/// When a server whose session ended (a stdio server that crashed, an HTTP server that went
/// away) or that could not connect is tried again: after `initial`, doubling per consecutive
/// failure up to `maximum`, each delay drawn uniformly from its upper half (jitter, so
/// servers that failed together do not retry together). A session that stayed up for
/// `stable` resets the count.
public struct MCPRestartPolicy: Sendable, Equatable {
    public var initial: Duration
    public var maximum: Duration
    public var stable: Duration

    public init(initial: Duration = .seconds(1), maximum: Duration = .seconds(60), stable: Duration = .seconds(60)) {
        self.initial = initial
        self.maximum = maximum
        self.stable = stable
    }

    /// The schedule: doubling from `initial` to `maximum`, each delay in its upper half.
    public var backoff: Backoff { Backoff(initial: initial, maximum: maximum, jitter: .upperHalf) }

    /// The ceiling of the delay before attempt `failures` (1 for the first retry).
    public func ceiling(afterFailures failures: Int) -> Duration {
        backoff.ceiling(afterFailures: max(failures, 1))
    }

    /// The delay before the next attempt: uniformly in [ceiling/2, ceiling], `unit` in 0...1.
    public func delay(afterFailures failures: Int, unit: Double) -> Duration {
        backoff.delay(afterFailures: max(failures, 1), unit: unit)
    }
}
