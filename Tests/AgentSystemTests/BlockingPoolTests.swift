import AgentSystem
import AgentTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite(.timeLimit(.minutes(3)))
struct BlockingPoolTests {
    @Test func runsWorkAndReturnsItsResult() async throws {
        let pool = BlockingPool(name: "t1", threads: 2, maxQueued: 4)
        let value = try await pool.run { _ in 6 * 7 }
        #expect(value == 42)
    }

    /// A full queue refuses at once instead of growing.
    @Test func aFullQueueRefuses() async throws {
        let pool = BlockingPool(name: "t2", threads: 1, maxQueued: 1)
        let (gate, blocker) = try await Self.occupy(pool)
        async let queued: Int = pool.run { _ in 1 }
        for _ in 0..<2000 where pool.load.queued < 1 { try await Task.sleep(for: .milliseconds(5)) }
        await #expect(throws: BlockingPool.Overloaded.self) { try await pool.run { _ in 2 } }
        gate.cancel()
        try await blocker.value
        #expect(try await queued == 1)
    }

    /// A job whose token is cancelled while it waits is answered at once and never runs.
    @Test func cancelledWaitingWorkNeverRuns() async throws {
        let pool = BlockingPool(name: "t3", threads: 1, maxQueued: 8)
        let (gate, blocker) = try await Self.occupy(pool)
        let token = CancelToken()
        let ranBox = TestFlag()
        let waiting = Task { try await pool.run(token: token) { _ in ranBox.set() } }
        for _ in 0..<2000 where pool.load.queued < 1 { try await Task.sleep(for: .milliseconds(5)) }
        token.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        gate.cancel()
        try await blocker.value
        // The dropped slot is skipped; later work still runs.
        #expect(try await pool.run { _ in 3 } == 3)
        #expect(!ranBox.isSet)
    }

    /// Running work sees its token: a long loop stops when the client goes.
    @Test func runningWorkSeesItsToken() async throws {
        let pool = BlockingPool(name: "t4", threads: 1, maxQueued: 8)
        let token = CancelToken()
        let started = CancelToken()
        let task = Task {
            try await pool.run(token: token) { token in
                started.cancel()
                for _ in 0..<60_000 { try token.check(); usleep(1000) }
            }
        }
        for _ in 0..<2000 where !started.isStopped { try await Task.sleep(for: .milliseconds(5)) }
        token.cancel()
        await #expect(throws: CancelToken.Stopped.self) { try await task.value }
    }

    /// A finished job keeps nothing it captured alive (a cycle through its token kept every
    /// job, and so every 256 KiB batch of a streamed write, for good: 1 GiB per 1 GiB file).
    @Test func aFinishedJobKeepsNothingAlive() async throws {
        final class Payload: Sendable {}
        let pool = BlockingPool(name: "t5", threads: 1, maxQueued: 4)
        let longLived = CancelToken()
        weak var first: Payload?
        weak var second: Payload?
        do {
            let payload = Payload()
            first = payload
            #expect(try await pool.run { _ in payload === payload } == true)
            let other = Payload()
            second = other
            #expect(try await pool.run(token: longLived) { _ in other === other } == true)
        }
        // The pool's thread lets go of a job just after its caller resumes: polled, bounded
        // (3 000 × 10 ms). A cycle would keep them for good.
        for _ in 0..<3000 where first != nil || second != nil { try await Task.sleep(for: .milliseconds(10)) }
        #expect(first == nil)
        #expect(second == nil)
    }

    /// Holds the pool's only thread until the returned gate is cancelled.
    static func occupy(_ pool: BlockingPool) async throws -> (gate: CancelToken, blocker: Task<Void, any Error>) {
        let gate = CancelToken()
        let started = CancelToken()
        let blocker = Task {
            try await pool.run { _ in
                started.cancel()
                for _ in 0..<60_000 where !gate.isStopped { usleep(1000) }
            }
        }
        for _ in 0..<2000 where !started.isStopped { try await Task.sleep(for: .milliseconds(5)) }
        return (gate, blocker)
    }

    @Test func aDeadlineStopsWork() throws {
        let token = CancelToken(deadline: .now - .seconds(1))
        #expect(token.stopReason == .deadline)
        #expect(throws: CancelToken.Stopped(reason: .deadline)) { try token.check() }
    }
}

/// Which threads say they may block.
@Suite struct BlockingThreadTests {
    @Test func aPoolsThreadsAreMarkedAndOthersAreNot() async throws {
        #expect(!BlockingThread.isCurrent)
        let pool = BlockingPool(name: "mark-test", threads: 1, maxQueued: 4)
        #expect(try await pool.run { _ in BlockingThread.isCurrent })
        let plain = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            AgentThread.start(name: "unmarked") { continuation.resume(returning: BlockingThread.isCurrent) }
        }
        #expect(!plain)
    }
}
