import AgentSystem

/// When the DERP client dials again, sans-IO (time is passed in): the failures in a row and
/// a relay's restart window decide the wait.
///
/// - A connection that stayed up ``DERPClient/Configuration/healthyAfter`` resets the
///   failures; the first redial waits a random part of the backoff floor. A failed dial, or
///   a connection shorter than that, is one more failure: the wait doubles up to the
///   ceiling (±20 % jitter).
/// - A Restarting frame on a healthy connection sets the next wait to its reconnect-in (at
///   most ``DERPClient/Configuration/maxRestartWait``), then redials every floor within its
///   try-for window (at most as long). On a connection shorter than healthy it counts as a
///   failure and waits at least the backoff: a relay that announces a restart right after
///   every handshake (reconnect-in 0) would otherwise be redialled at once, forever.
struct DERPRedialPolicy: Sendable {
    let floor: Duration
    let ceiling: Duration
    let healthyAfter: Duration
    let maxRestartWait: Duration
    /// Failed dials and short connections in a row.
    private(set) var failures = 0
    /// The end of the relay's try-for window, while one is open.
    private var restartUntil: ContinuousClock.Instant?

    init(_ configuration: DERPClient.Configuration) {
        floor = configuration.backoffFloor
        ceiling = configuration.backoffCeiling
        healthyAfter = configuration.healthyAfter
        maxRestartWait = configuration.maxRestartWait
    }

    /// A connection that lasted `lived` ended, with the relay's Restarting notice if it sent
    /// one: the wait before the next dial.
    mutating func ended(lived: Duration, restarting: (reconnectIn: Duration, tryFor: Duration)?, now: ContinuousClock.Instant) -> Duration {
        let healthy = lived >= healthyAfter
        failures = healthy ? 0 : failures + 1
        guard let restarting else { return wait(now: now) }
        let reconnectIn = min(max(restarting.reconnectIn, .zero), maxRestartWait)
        guard healthy else {
            restartUntil = nil
            return max(reconnectIn, backoff())
        }
        restartUntil = now + reconnectIn + min(max(restarting.tryFor, .zero), maxRestartWait)
        return reconnectIn
    }

    /// A dial failed: the wait before the next.
    mutating func dialFailed(now: ContinuousClock.Instant) -> Duration {
        failures += 1
        return wait(now: now)
    }

    private mutating func wait(now: ContinuousClock.Instant) -> Duration {
        if let until = restartUntil, now < until { return floor }
        restartUntil = nil
        return backoff()
    }

    private func backoff() -> Duration {
        failures == 0
            ? floor * Double.random(in: 0...1)
            : Backoff(initial: floor, maximum: ceiling, jitter: .spread(0.2)).delay(afterFailures: failures)
    }
}
