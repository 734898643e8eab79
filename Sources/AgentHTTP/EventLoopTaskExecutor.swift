import NIOCore

/// Runs a task's jobs on one NIO event loop: an HTTP connection's handler task prefers its
/// channel's loop, so a request's reads, handler and writes stay on one thread instead of
/// hopping to Swift's global executor and back for each of them (two thread wake-ups per
/// request, measured: `agent-bench http`).
///
/// Default actors called from such a task run their methods on the loop too, so only
/// handlers audited as never blocking run here (``RouteExecutor/eventLoop``); every other
/// route's handler runs on Swift's global executor (``RouteExecutor/pool``, the default).
///
/// Only for loops of a group that is never shut down (the server's is NIO's singleton):
/// NIO drops `execute` on a stopped loop, which would strand the task.
final class EventLoopTaskExecutor: TaskExecutor {
    let loop: any EventLoop

    init(_ loop: any EventLoop) { self.loop = loop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
