import Dispatch
import Synchronization

/// A capability's own threads for blocking work (file I/O, libgit2 scans), so a slow disk
/// or a huge repository in one capability cannot stop another, as NIO's shared two-thread
/// pool did. Work is queued in order; a full queue refuses at once (``Overloaded``); work
/// whose ``CancelToken`` is cancelled while queued is dropped without running, and running
/// work sees the token to stop early.
///
/// Bounded: `threads` threads (started on first use, kept for the process's life) and at
/// most `maxQueued` jobs waiting.
public final class BlockingPool: Sendable {
    /// The queue is full.
    public struct Overloaded: Error, Sendable, CustomStringConvertible {
        public var pool: String
        public var description: String { "the \(pool) pool is busy; try again" }
    }

    private final class Job: Sendable {
        let id: UInt64
        let token: CancelToken
        let run: @Sendable () -> Void
        let drop: @Sendable () -> Void
        init(id: UInt64, token: CancelToken, run: @escaping @Sendable () -> Void, drop: @escaping @Sendable () -> Void) {
            self.id = id
            self.token = token
            self.run = run
            self.drop = drop
        }
    }

    private struct State {
        /// Jobs in order (a finished job, and what its closure holds, such as a 256 KiB
        /// batch of a streamed write, is freed when it is taken).
        var queue = FIFOQueue<Job>()
        var started = 0
        var nextID: UInt64 = 0
        var busy = 0
        var queued: Int { queue.count }
    }

    public let name: String
    public let threads: Int
    public let maxQueued: Int
    private let state = Mutex(State())
    private let available = DispatchSemaphore(value: 0)

    public init(name: String, threads: Int, maxQueued: Int) {
        precondition(threads > 0 && maxQueued > 0)
        self.name = name
        self.threads = threads
        self.maxQueued = maxQueued
    }

    /// Jobs waiting, and jobs running now (for metrics and tests).
    public var load: (queued: Int, running: Int) { state.withLock { ($0.queued, $0.busy) } }

    /// Runs `body` on one of the pool's threads. Throws ``Overloaded`` when the queue is
    /// full, `CancellationError` when `token` (or the calling task) is cancelled before the
    /// body starts, and whatever the body throws.
    public func run<T: Sendable>(
        token: CancelToken = CancelToken(), _ body: @escaping @Sendable (CancelToken) throws -> T
    ) async throws -> T {
        // The cancel handler this call registers on `token`, withdrawn when the call ends:
        // a long-lived token must not collect one handler per job.
        let handlerKey = Mutex<UInt64?>(nil)
        defer { token.removeHandler(handlerKey.withLock { $0 }) }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                let completion = Completion(continuation)
                @Sendable func finish(_ result: Result<T, any Error>) { completion.finish(result) }
                let enqueued = state.withLock { s -> Job? in
                    guard s.queued < maxQueued else { return nil }
                    s.nextID += 1
                    let job = Job(
                        id: s.nextID, token: token,
                        run: { finish(Result { try body(token) }) },
                        drop: { finish(.failure(CancellationError())) })
                    s.queue.append(job)
                    return job
                }
                guard let job = enqueued else {
                    continuation.resume(throwing: Overloaded(pool: name))
                    return
                }
                startThreadIfNeeded()
                available.signal()
                // A job cancelled while queued answers at once; its slot is skipped later. Weak:
                // the job holds the token, and a strong capture here was a cycle that kept
                // every job, and what its closure captured, alive for good.
                let key = token.onCancel { [weak self, weak job] in
                    guard let self, let job else { return }
                    let id = job.id
                    let stillQueued = self.state.withLock { s in s.queue.contains { $0.id == id } }
                    if stillQueued { job.drop() }
                }
                handlerKey.withLock { $0 = key }
            }
        } onCancel: {
            token.cancel()
        }
    }

    /// Queues `body` to run on one of the pool's threads without waiting for it (from a
    /// thread that must not wait, such as a reactor's); false when the queue is full.
    @discardableResult
    public func submit(_ body: @escaping @Sendable () -> Void) -> Bool {
        let queued = state.withLock { s -> Bool in
            guard s.queued < maxQueued else { return false }
            s.nextID += 1
            s.queue.append(Job(id: s.nextID, token: CancelToken(), run: body, drop: {}))
            return true
        }
        guard queued else { return false }
        startThreadIfNeeded()
        available.signal()
        return true
    }

    /// Resumes its continuation once: the job's run and a cancellation may race.
    private final class Completion<T: Sendable>: Sendable {
        private let continuation: Mutex<CheckedContinuation<T, any Error>?>
        init(_ continuation: CheckedContinuation<T, any Error>) { self.continuation = Mutex(continuation) }
        func finish(_ result: Result<T, any Error>) {
            let waiting = continuation.withLock { c in
                defer { c = nil }
                return c
            }
            waiting?.resume(with: result)
        }
    }

    private func startThreadIfNeeded() {
        let start = state.withLock { s -> Bool in
            guard s.started < threads, s.busy + s.queued > s.started else { return false }
            s.started += 1
            return true
        }
        guard start else { return }
        AgentThread.start(name: "blk-\(name)") { [self] in worker() }
    }

    private func worker() {
        BlockingThread.markCurrent()
        while true {
            available.wait()
            let job = state.withLock { s -> Job? in
                guard let job = s.queue.popFirst() else { return nil }
                s.busy += 1
                return job
            }
            guard let job else { continue }
            if job.token.isStopped { job.drop() } else { job.run() }
            state.withLock { $0.busy -= 1 }
        }
    }
}
