import AgentCore

/// What one server may make the agent do, on a clock the caller passes in (sans-IO): bytes
/// read (``MCPLimits/inboundBytesPerSecond``), stderr bytes read
/// (``MCPLimits/stderrBytesPerSecond``), and requests and notifications it sends unasked
/// (``MCPLimits/unsolicitedPerSecond``). Answers to the agent's own requests are never
/// refused: the agent bounds how many it asks for.
///
/// The readers ask ``readyAt(now:)`` before reading and spend what they read: a server
/// that floods waits on its full pipe or TCP window instead of costing the agent CPU.
public struct MCPInboundLimiter: Sendable {
    private var bytes: TokenBucket
    private var stderrBytes: TokenBucket
    private var unsolicited: TokenBucket
    /// Set when an unsolicited message was dropped: reading waits until a tenth of the burst
    /// has refilled, so that a flood is read in few large steps rather than one per token.
    private var throttled = false
    /// Unsolicited messages dropped so far.
    public private(set) var dropped = 0

    public init(
        bytesPerSecond: Int = MCPLimits.inboundBytesPerSecond, burstBytes: Int = MCPLimits.maxMessageBytes,
        stderrBytesPerSecond: Int = MCPLimits.stderrBytesPerSecond,
        unsolicitedBurst: Int = MCPLimits.unsolicitedBurst, unsolicitedPerSecond: Int = MCPLimits.unsolicitedPerSecond,
        now: ContinuousClock.Instant
    ) {
        bytes = TokenBucket(capacity: Double(burstBytes), perSecond: Double(bytesPerSecond), now: now)
        stderrBytes = TokenBucket(capacity: Double(stderrBytesPerSecond), perSecond: Double(stderrBytesPerSecond), now: now)
        unsolicited = TokenBucket(capacity: Double(unsolicitedBurst), perSecond: Double(unsolicitedPerSecond), now: now)
    }

    /// When the server's messages may be read again (`now` when they may be at once).
    public func readyAt(now: ContinuousClock.Instant) -> ContinuousClock.Instant {
        let forBytes = bytes.readyAt(1, now: now)
        guard throttled else { return forBytes }
        return max(forBytes, unsolicited.readyAt(max(1, unsolicited.capacity / 10), now: now))
    }

    /// Whether reading may go on now; clears the throttle once a tenth of the burst is back.
    public mutating func mayRead(now: ContinuousClock.Instant) -> Bool {
        let ready = readyAt(now: now) <= now
        if ready { throttled = false }
        return ready
    }

    /// `count` bytes of messages were read.
    public mutating func read(_ count: Int, now: ContinuousClock.Instant) {
        bytes.spend(Double(count), now: now)
    }

    /// Whether `message` may be handled: always an answer; a request or notification when a
    /// token is left (else it is counted as dropped and reading is throttled).
    public mutating func admit(_ message: JSONRPCMessage, now: ContinuousClock.Instant) -> Bool {
        switch message {
        case .result, .error: return true
        case .request, .notification: break
        }
        if unsolicited.take(now: now) { return true }
        dropped += 1
        throttled = true
        return false
    }

    /// When stderr may be read again.
    public func stderrReadyAt(now: ContinuousClock.Instant) -> ContinuousClock.Instant {
        stderrBytes.readyAt(1, now: now)
    }

    /// `count` stderr bytes were read.
    public mutating func readStderr(_ count: Int, now: ContinuousClock.Instant) {
        stderrBytes.spend(Double(count), now: now)
    }
}
