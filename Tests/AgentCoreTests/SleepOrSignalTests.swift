import AgentCore
import Synchronization
import Testing

/// A clock that moves only when the test advances it; sleepers are announced as they arrive.
final class ManualClock: Clock, Sendable {
    struct Instant: InstantProtocol {
        var offset: Duration
        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (a: Instant, b: Instant) -> Bool { a.offset < b.offset }
    }

    private struct Sleeper {
        var id: Int
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }
    private struct State {
        var now = Instant(offset: .zero)
        var nextID = 0
        var sleepers: [Sleeper] = []
    }
    private let state = Mutex(State())
    let arrivals: AsyncStream<Void>
    private let arrived: AsyncStream<Void>.Continuation

    init() { (arrivals, arrived) = AsyncStream.makeStream(of: Void.self) }

    var now: Instant { state.withLock { $0.now } }
    var minimumResolution: Duration { .nanoseconds(1) }
    var sleeping: Int { state.withLock { $0.sleepers.count } }

    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        let id = state.withLock { s in
            s.nextID += 1
            return s.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let due = state.withLock { s -> Bool in
                    if deadline <= s.now || Task.isCancelled { return true }
                    s.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return false
                }
                if due {
                    if Task.isCancelled { continuation.resume(throwing: CancellationError()) } else { continuation.resume() }
                } else {
                    arrived.yield()
                }
            }
        } onCancel: {
            let sleeper = state.withLock { s -> Sleeper? in
                guard let index = s.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return s.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    func advance(by duration: Duration) {
        let due = state.withLock { s -> [Sleeper] in
            s.now = s.now.advanced(by: duration)
            let now = s.now
            let due = s.sleepers.filter { $0.deadline <= now }
            s.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }
}

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
