import NIOCore

/// At most one challenge ACK per flow per ``interval`` (gVisor's 500 ms), so a peer that
/// repeats SYNs on an open connection gets one answer per interval, not one per SYN.
///
/// Only flows lwIP knows get challenge ACKs, so ``capacity`` (the stack's connection
/// bound) covers every flow answered within one interval; when it is reached, the entries
/// older than the interval go, and a flow that still finds it full gets no answer (its
/// peer's next SYN may). Memory: `capacity` entries of about 80 bytes.
struct ChallengeAckLimiter {
    let interval: TimeAmount
    let capacity: Int
    private var lastSent: [TunnelFlow: NIODeadline] = [:]

    init(interval: TimeAmount, capacity: Int) {
        self.interval = interval
        self.capacity = max(capacity, 1)
    }

    /// Whether `flow` may get a challenge ACK `now`; if so, it counts as sent.
    mutating func allow(_ flow: TunnelFlow, now: NIODeadline) -> Bool {
        if let last = lastSent[flow], now < last + interval { return false }
        if lastSent[flow] == nil, lastSent.count >= capacity {
            lastSent = lastSent.filter { now < $0.value + interval }
            if lastSent.count >= capacity { return false }
        }
        lastSent[flow] = now
        return true
    }

    /// Flows remembered (for tests).
    var count: Int { lastSent.count }
}
