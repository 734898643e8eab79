/// When a log source's waiting lines are sent (the reference's pacing, adapted to a
/// journal that never drops): at once when nothing was sent in the last
/// ``interval``; otherwise when ``interval`` has passed since the last send, or at once
/// when a full batch (``LogBatching/budgetBytes``) is waiting, a flush was asked for (a
/// script run ended) or the agent is shutting down. Pure: the caller owns the clock and
/// keeps one planner per log source.
struct LogBatchPlanner: Sendable {
    static let interval: Duration = .seconds(1)

    /// What the sender does next for this source.
    enum Decision: Equatable, Sendable {
        /// Send a batch (``LogBatching/sameSourcePrefix(_:budget:)``) now.
        case sendNow
        /// Nothing to do before this instant (unless more lines or a flush arrive).
        case wait(until: ContinuousClock.Instant)
        /// Nothing is waiting.
        case idle
    }

    /// When the last request for this source went out; nil before the first.
    private(set) var lastSent: ContinuousClock.Instant?

    /// `pendingBytes`: the waiting lines' cost (Σ len(output) + 21), 0 when none wait; an
    /// upper estimate such as ``UploadJournal/pendingBytes`` (frames are 13 bytes per line
    /// larger) only makes a "full batch" come a little early.
    func decision(now: ContinuousClock.Instant, pendingBytes: Int, flushRequested: Bool = false, shuttingDown: Bool = false) -> Decision {
        guard pendingBytes > 0 else { return .idle }
        if flushRequested || shuttingDown || pendingBytes >= LogBatching.budgetBytes { return .sendNow }
        guard let lastSent else { return .sendNow }
        let due = lastSent + Self.interval
        return now >= due ? .sendNow : .wait(until: due)
    }

    mutating func sent(at instant: ContinuousClock.Instant) {
        lastSent = instant
    }
}
