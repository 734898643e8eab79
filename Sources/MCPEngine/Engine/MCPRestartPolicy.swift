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

    /// The ceiling of the delay before attempt `failures` (1 for the first retry).
    public func ceiling(afterFailures failures: Int) -> Duration {
        var delay = initial
        // At most 62 doublings: any failure count costs bounded work and cannot overflow.
        for _ in 1..<min(max(failures, 1), 63) where delay < maximum { delay = delay * 2 }
        return min(delay, maximum)
    }

    /// The delay before the next attempt: uniformly in [ceiling/2, ceiling], `unit` in 0...1.
    public func delay(afterFailures failures: Int, unit: Double) -> Duration {
        let ceiling = ceiling(afterFailures: failures)
        return ceiling / 2 + ceiling / 2 * min(max(unit, 0), 1)
    }
}
