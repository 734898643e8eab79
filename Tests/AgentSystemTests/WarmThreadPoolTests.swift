import AgentSystem
import Dispatch
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite(.timeLimit(.minutes(2)))
struct WarmThreadPoolTests {
    /// Threads start as jobs need them, up to the bound; beyond it jobs wait in order and
    /// every one runs, on a thread of the pool marked as one that may block.
    @Test func threadsStartAsNeededAndJobsQueueBeyondThem() throws {
        let pool = WarmThreadPool(name: "warm-t1", threads: 2)
        #expect(pool.load.started == 0)
        let gate = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let order = Mutex<[Int]>([])
        let blocking = Mutex<[Bool]>([])
        for i in 0..<5 {
            pool.submit {
                blocking.withLock { $0.append(BlockingThread.isCurrent) }
                if i < 2 { gate.wait() }
                order.withLock { $0.append(i) }
                done.signal()
            }
        }
        #expect(pool.load.started == 2)
        #expect(pool.load.queued >= 3)
        gate.signal()
        gate.signal()
        for _ in 0..<5 { #expect(done.wait(timeout: .now() + 60) == .success) }
        #expect(order.withLock { $0.sorted() } == [0, 1, 2, 3, 4])
        #expect(blocking.withLock { $0 } == Array(repeating: true, count: 5))
        #expect(pool.load.started == 2)
    }

    /// Jobs waiting for the one thread run in the order they came.
    @Test func waitingJobsRunInOrder() throws {
        let pool = WarmThreadPool(name: "warm-t3", threads: 1)
        let gate = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let order = Mutex<[Int]>([])
        pool.submit { gate.wait() }
        for i in 0..<100 {
            pool.submit {
                order.withLock { $0.append(i) }
                done.signal()
            }
        }
        gate.signal()
        for _ in 0..<100 { #expect(done.wait(timeout: .now() + 60) == .success) }
        #expect(order.withLock { $0 } == Array(0..<100))
        #expect(pool.load.queued == 0)
    }

    /// A job goes to the thread that parked last: three threads end their jobs in turn, and
    /// the next two jobs run on the third, then (while it is held) on the second.
    @Test func theThreadThatParkedLastTakesTheNextJob() throws {
        let pool = WarmThreadPool(name: "warm-t2", threads: 3)
        let gates = (0..<3).map { _ in DispatchSemaphore(value: 0) }
        let started = DispatchSemaphore(value: 0)
        let threadOf = Mutex<[Int: pthread_t]>([:])
        for i in 0..<3 {
            pool.submit {
                threadOf.withLock { $0[i] = pthread_self() }
                started.signal()
                gates[i].wait()
            }
        }
        for _ in 0..<3 { #expect(started.wait(timeout: .now() + 60) == .success) }
        // Release them one by one, each parked before the next is released.
        for i in 0..<3 {
            gates[i].signal()
            try Self.waitUntil { pool.load.parked == i + 1 }
        }
        let hold = DispatchSemaphore(value: 0)
        let ran = DispatchSemaphore(value: 0)
        let ranOn = Mutex<[pthread_t]>([])
        pool.submit {
            ranOn.withLock { $0.append(pthread_self()) }
            ran.signal()
            hold.wait()
        }
        #expect(ran.wait(timeout: .now() + 60) == .success)
        pool.submit {
            ranOn.withLock { $0.append(pthread_self()) }
            ran.signal()
        }
        #expect(ran.wait(timeout: .now() + 60) == .success)
        hold.signal()
        let threads = threadOf.withLock { $0 }
        let used = ranOn.withLock { $0 }
        #expect(used.count == 2)
        #expect(pthread_equal(used[0], threads[2]!) != 0)
        #expect(pthread_equal(used[1], threads[1]!) != 0)
        #expect(pool.load.started == 3)
    }

    /// Polls `condition` every millisecond for at most a minute.
    static func waitUntil(_ condition: () -> Bool) throws {
        for _ in 0..<60_000 {
            if condition() { return }
            usleep(1000)
        }
        Issue.record("condition not met within a minute")
    }
}
