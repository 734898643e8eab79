import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import Testing

/// A task executor with two threads of its own, for tests that compute or block for long
/// (model checks over thousands of random inputs, `pthread_join` on writer threads).
///
/// Why: Swift's cooperative pool has one thread per core, two on the CI host. A test body
/// that computes for seconds holds one of them; two such tests hold both, and every async
/// test in the process (a WebSocket read, an `eventually` poll, an in-process stream) then
/// waits. Runs of the whole suite showed 15–30 s in which no async test moved, long enough
/// for their deadlines to pass. Run here, such tests queue among themselves and leave the
/// pool to the rest; the kernel still shares the cores fairly between all threads.
public final class TestThreadExecutor: TaskExecutor {
    /// The executor ``Trait/ownThreads`` runs tests on.
    public static let shared = TestThreadExecutor(threads: 2)

    /// Jobs waiting for a thread. Bounded by the tasks that prefer this executor: the tests
    /// marked ``Trait/ownThreads`` and their child tasks, each enqueued at most once at a time.
    private let jobs = Mutex<[UnownedJob]>([])
    private let ready = DispatchSemaphore(value: 0)
    /// The threads' `pthread_self()` values, for ``runsOnCurrentThread``.
    private let threadIDs = Mutex<Set<UInt>>([])

    init(threads: Int) {
        for _ in 0..<threads {
            let thread = Thread { [self] in
                threadIDs.withLock { _ = $0.insert(UInt(pthread_self())) }
                while true {
                    ready.wait()
                    guard let job = jobs.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { continue }
                    job.runSynchronously(on: asUnownedTaskExecutor())
                }
            }
            thread.start()
        }
    }

    /// Whether the calling thread is one of this executor's (a synchronous check).
    public var runsOnCurrentThread: Bool {
        threadIDs.withLock { $0.contains(UInt(pthread_self())) }
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        jobs.withLock { $0.append(unowned) }
        ready.signal()
    }
}

/// Runs a test (or every test of a suite) on ``TestThreadExecutor``, off the cooperative pool.
public struct OwnThreadsTrait: TestTrait, SuiteTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await withTaskExecutorPreference(TestThreadExecutor.shared) {
            try await function()
        }
    }
}

extension Trait where Self == OwnThreadsTrait {
    /// The test computes or blocks for long: run it on threads of its own
    /// (``TestThreadExecutor``) so that it cannot starve the async tests.
    public static var ownThreads: Self { OwnThreadsTrait() }
}
