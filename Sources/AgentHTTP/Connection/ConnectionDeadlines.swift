/// The connection's deadlines, one per ``ConnectionTimer``, each with the wake-up scheduled
/// for it. Lazy: moving a deadline is a store; a wake-up is armed only when the new deadline
/// comes before the one already scheduled, and a wake-up that comes early re-arms for the
/// deadline then current.
struct ConnectionDeadlines<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    private struct Deadline: Sendable {
        var at: Instant?
        var scheduled: Instant?
    }

    private var deadlines = [Deadline](repeating: Deadline(), count: ConnectionTimer.allCases.count)

    /// Whether `timer` has a deadline.
    func isSet(_ timer: ConnectionTimer) -> Bool { deadlines[timer.rawValue].at != nil }

    /// Moves `timer`'s deadline to `at`; arms a wake-up only when none comes first.
    mutating func arm(_ timer: ConnectionTimer, at: Instant, now: Instant, _ actions: inout HTTP1ConnectionActions) {
        deadlines[timer.rawValue].at = at
        if let scheduled = deadlines[timer.rawValue].scheduled, scheduled <= at { return }
        deadlines[timer.rawValue].scheduled = at
        actions.append(.armTimer(timer, now.duration(to: at)))
    }

    /// Moves `timer`'s deadline, if set, `delay` later (lazy: the wake-up then comes early).
    mutating func postpone(_ timer: ConnectionTimer, by delay: Duration) {
        deadlines[timer.rawValue].at = deadlines[timer.rawValue].at?.advanced(by: delay)
    }

    /// Drops `timer`'s deadline (a wake-up already scheduled finds nothing due).
    mutating func clear(_ timer: ConnectionTimer) {
        deadlines[timer.rawValue].at = nil
    }

    /// For a wake-up of `timer`: true if its deadline has passed (then cleared); false if
    /// none is set or it is still ahead (then re-armed for it).
    mutating func due(_ timer: ConnectionTimer, now: Instant, _ actions: inout HTTP1ConnectionActions) -> Bool {
        var deadline = deadlines[timer.rawValue]
        defer { deadlines[timer.rawValue] = deadline }
        deadline.scheduled = nil
        guard let at = deadline.at else { return false }
        if at > now {
            deadline.scheduled = at
            actions.append(.armTimer(timer, now.duration(to: at)))
            return false
        }
        deadline.at = nil
        return true
    }
}
