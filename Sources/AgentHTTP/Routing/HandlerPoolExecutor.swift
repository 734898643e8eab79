import AgentCore
import AgentSystem

/// Where `.pool` routes' handlers run: threads of their own, not Swift's global executor.
///
/// The global executor is as wide as the cores (2 on a small workspace): two handlers, or
/// any module code, blocking on it (a file read, a lock, a child's pipe) would stall every
/// other pooled request and every task of the agent. Here a blocked handler holds one of
/// ``threads`` threads; the rest keep answering. Its queue holds at most one request task
/// per connection (a connection runs one request at a time), so the HTTP connection cap
/// bounds it. Its threads are ``BlockingThread``s: blocking work a handler asks for runs on
/// the handler's own thread, without a hop to another pool and back. A job goes to the
/// thread that parked last (``WarmThreadPool``): 2 % less time from `POST /start` to the
/// exit's answer than NIO's pool, whose waiting threads take turns (docs/benchmarks.md).
final class HandlerPoolExecutor: TaskExecutor {
    /// The pool's width: the most handlers that may block at once before others wait.
    static let threads = 16

    /// Started on first use and never stopped (it serves every listener until exit).
    static let shared = HandlerPoolExecutor()

    private let pool = WarmThreadPool(name: "handler", threads: threads)

    private init() {}

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        pool.submit { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
