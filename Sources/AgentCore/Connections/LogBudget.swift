import Synchronization

/// At most ``perMinute`` lines of one kind a minute, for warnings an outside client can cause
/// at will (connections evicted or refused, frames left unfinished): the lines past it are
/// counted, and the next line that goes out says how many were left out. A connect loop then
/// cannot fill the agent's log or rotate its history away; the metrics still count each one.
public final class LogBudget: Sendable {
    public let perMinute: Int
    private let state = Mutex<(minuteStarted: ContinuousClock.Instant?, count: Int, leftOut: Int)>((nil, 0, 0))

    public init(perMinute: Int = 10) {
        self.perMinute = perMinute
    }

    /// Calls `write` with the number of lines left out since the last one written, if a line
    /// may go out `now`.
    public func log(now: ContinuousClock.Instant = .now, _ write: (_ leftOut: Int) -> Void) {
        let leftOut: Int? = state.withLock { state in
            if let started = state.minuteStarted, now - started < .seconds(60) {
                guard state.count < perMinute else {
                    state.leftOut += 1
                    return nil
                }
            } else {
                state.minuteStarted = now
                state.count = 0
            }
            state.count += 1
            defer { state.leftOut = 0 }
            return state.leftOut
        }
        if let leftOut { write(leftOut) }
    }
}
