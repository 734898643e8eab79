import AgentSystem
import AgentTestSupport
import Synchronization
import Testing

struct SleepOrSignalTests {
    /// A wait on `clock` for `seconds` or `signal`, once its sleep has reached the clock.
    static func waiting(
        _ clock: ManualClock, seconds: Int64, signal: @escaping @Sendable () async -> Void
    ) async -> Task<SleepOutcome, Never> {
        let task = Task { await sleep(until: clock.now.advanced(by: .seconds(seconds)), clock: clock, orUntil: signal) }
        var arrivals = clock.arrivals.makeAsyncIterator()
        await arrivals.next()
        return task
    }

    @Test func theDeadlineEndsTheWaitAndCancelsTheSignal() async {
        let clock = ManualClock()
        let signal = WorkSignal()
        let waiting = await Self.waiting(clock, seconds: 10) { await signal.wait() }
        clock.advance(by: .seconds(9))
        #expect(clock.sleeping == 1, "not due before its deadline")
        clock.advance(by: .seconds(1))
        #expect(await waiting.value == .elapsed)
        // The signal's waiter was cancelled: a later notify is kept for the next wait.
        signal.notify()
        await signal.wait()
    }

    /// The signal, or the caller's cancellation, ends the wait and cancels the clock's sleep.
    @Test(arguments: [SleepOutcome.signalled, .cancelled])
    func anEndBeforeTheDeadlineCancelsTheSleep(_ end: SleepOutcome) async {
        let clock = ManualClock()
        let signal = OneShotSignal()
        let waiting = await Self.waiting(clock, seconds: 3600) { await signal.wait() }
        if end == .signalled { signal.fire() } else { waiting.cancel() }
        #expect(await waiting.value == end)
        #expect(clock.sleeping == 0, "the sleep was cancelled, not left behind")
    }

    @Test func aCancelledCallerDoesNotWait() async {
        let signal = WorkSignal()
        let already = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await sleep(for: .seconds(3600), orUntil: { await signal.wait() })
        }
        #expect(await already.value == .cancelled)
    }
}
