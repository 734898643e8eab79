/// What ended a `sleep(until:clock:orUntil:)`.
public enum SleepOutcome: Sendable, Equatable {
    /// The deadline passed.
    case elapsed
    /// `signal` returned first.
    case signalled
    /// The calling task was cancelled.
    case cancelled
}

/// Waits until `deadline` on `clock` or until `signal` returns, whichever comes first, and
/// cancels the other (so `signal` must return when its task is cancelled, as the agent's
/// latches do). Returns at once, `.cancelled`, in a cancelled task.
@discardableResult
public func sleep<C: Clock>(
    until deadline: C.Instant, clock: C, orUntil signal: @escaping @Sendable () async -> Void
) async -> SleepOutcome where C.Duration == Duration {
    guard !Task.isCancelled else { return .cancelled }
    let first = await withTaskGroup(of: SleepOutcome.self) { group in
        group.addTask {
            do {
                try await clock.sleep(until: deadline, tolerance: nil)
                return .elapsed
            } catch {
                return .cancelled
            }
        }
        group.addTask {
            await signal()
            return Task.isCancelled ? .cancelled : .signalled
        }
        let first = await group.next() ?? .cancelled
        group.cancelAll()
        return first
    }
    return Task.isCancelled ? .cancelled : first
}

/// Waits `duration` on the continuous clock or until `signal` returns (see above).
@discardableResult
public func sleep(for duration: Duration, orUntil signal: @escaping @Sendable () async -> Void) async -> SleepOutcome {
    let clock = ContinuousClock()
    return await sleep(until: clock.now.advanced(by: duration), clock: clock, orUntil: signal)
}
