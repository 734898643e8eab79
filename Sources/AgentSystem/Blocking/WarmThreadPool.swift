import Dispatch
import Synchronization

/// Threads for work that may block, started as they are needed (at most `threads`), each
/// job handed to the thread that parked last: its stack and the caches it warmed are still
/// there, where a condition variable's waiters take turns, so that every job met a cold
/// thread. Jobs wait in order when every thread is busy.
///
/// Bounded: `threads` threads, kept for the process's life; the queue holds what callers
/// submit (the caller bounds it: ``HandlerPoolExecutor`` holds one request task per
/// connection).
public final class WarmThreadPool: Sendable {
    public typealias Job = @Sendable () -> Void

    /// A parked thread's wake-up.
    private final class Parked: Sendable {
        let wake = DispatchSemaphore(value: 0)
    }

    private struct State {
        var jobs = FIFOQueue<Job>()
        /// Parked threads, the most recent last.
        var parked: [Parked] = []
        var started = 0
    }

    public let name: String
    public let threads: Int
    private let state = Mutex(State())

    public init(name: String, threads: Int) {
        precondition(threads > 0)
        self.name = name
        self.threads = threads
    }

    /// Threads parked, threads started, jobs waiting (for tests and metrics).
    public var load: (parked: Int, started: Int, queued: Int) {
        state.withLock { ($0.parked.count, $0.started, $0.jobs.count) }
    }

    /// Runs `job` on a thread of the pool: the last one to park, else a new one, else the
    /// first to finish its job.
    public func submit(_ job: @escaping Job) {
        let (wake, start) = state.withLock { s -> (Parked?, Bool) in
            s.jobs.append(job)
            if let parked = s.parked.popLast() { return (parked, false) }
            guard s.started < threads else { return (nil, false) }
            s.started += 1
            return (nil, true)
        }
        wake?.wake.signal()
        if start { AgentThread.start(name: name) { [self] in worker() } }
    }

    private func worker() {
        BlockingThread.markCurrent()
        let parked = Parked()
        while true {
            let job = state.withLock { s -> Job? in
                guard let job = s.jobs.popFirst() else {
                    s.parked.append(parked)
                    return nil
                }
                return job
            }
            if let job { job() } else { parked.wake.wait() }
        }
    }
}
