import NIOCore

/// Runs a task's jobs on one NIO event loop: an HTTP connection's handler task prefers its
/// channel's loop, so a request's reads, handler and writes stay on one thread instead of
/// hopping to Swift's global executor and back for each of them (two thread wake-ups per
/// request, measured: `agent-bench http`). Actors keep their own executors; blocking work
/// already goes to `NIOThreadPool`.
final class EventLoopTaskExecutor: TaskExecutor {
    let loop: any EventLoop

    init(_ loop: any EventLoop) { self.loop = loop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
