import AgentCore
import CAgentSpawn
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Wakes writers waiting for a full pipe or terminal to take more bytes: one thread and one
/// epoll set for every waiting writer of the process, started on first use.
///
/// A wait is one-shot (`EPOLLONESHOT`) and ends when the descriptor becomes writable (or
/// reports an error), when its deadline passes, or when the waiting task is cancelled.
/// Memory: one small record per waiting writer; writers wait one at a time per process
/// (``ProcessInput`` serializes them), so at most one per process with stdin.
final class WritableWaiter: Sendable {
    static let shared = WritableWaiter()

    private struct Waiting {
        var fd: Int32
        var continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var epfd: Int32 = -1
        var waiting: [UInt64: Waiting] = [:]
        var nextToken: UInt64 = 1
    }

    private let state = Mutex(State())

    /// Epoll set, made (with its thread) on first use; -1 if the kernel refused one.
    private func epoll() -> Int32 {
        state.withLock { s -> Int32 in
            if s.epfd >= 0 { return s.epfd }
            let fd = agent_epoll_create()
            guard fd >= 0 else { return -1 }
            s.epfd = fd
            AgentThread.start(name: "agent-proc-input") { [self] in loop(fd) }
            return fd
        }
    }

    /// True when `fd` can take bytes now (or has an error a write will report); false when
    /// `timeout` passed first or the task was cancelled.
    func waitWritable(_ fd: Int32, timeout: Duration) async -> Bool {
        let epfd = epoll()
        guard epfd >= 0 else {
            // No epoll: a bounded poll on this thread (never expected on Linux).
            var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            return poll(&entry, 1, Int32(min(timeout / .milliseconds(1), 10_000))) > 0
        }
        let token = state.withLock { s -> UInt64 in
            defer { s.nextToken += 1 }
            return s.nextToken
        }
        // The deadline's timer starts once the wait is registered, so it cannot fire first
        // and be lost.
        let timer = Mutex<Task<Void, Never>?>(nil)
        defer { timer.withLock { $0?.cancel() } }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let added = state.withLock { s -> Bool in
                    guard !Task.isCancelled else { return false }
                    s.waiting[token] = Waiting(fd: fd, continuation: continuation)
                    if agent_epoll_add_writable(epfd, fd, token) != 0 {
                        s.waiting[token] = nil
                        return false
                    }
                    return true
                }
                // Not registered (cancelled, or a descriptor epoll refuses): say "try the write",
                // which reports the real state.
                guard added else {
                    continuation.resume(returning: !Task.isCancelled)
                    return
                }
                timer.withLock {
                    $0 = Task {
                        try? await Task.sleep(for: timeout)
                        self.finish(token, epfd: epfd, writable: false)
                    }
                }
            }
        } onCancel: {
            self.finish(token, epfd: epfd, writable: false)
        }
    }

    /// Ends a wait once (whichever of event, deadline and cancellation comes first).
    private func finish(_ token: UInt64, epfd: Int32, writable: Bool) {
        let waiting = state.withLock { s -> Waiting? in
            guard let waiting = s.waiting.removeValue(forKey: token) else { return nil }
            agent_epoll_del(epfd, waiting.fd)
            return waiting
        }
        waiting?.continuation.resume(returning: writable)
    }

    private func loop(_ epfd: Int32) {
        var events = [UInt64](repeating: 0, count: 64)
        while true {
            let n = events.withUnsafeMutableBufferPointer { agent_epoll_wait(epfd, $0.baseAddress, 64, -1) }
            if n < 0 {
                if errno == EINTR { continue }
                return
            }
            for i in 0..<Int(n) { finish(events[i], epfd: epfd, writable: true) }
        }
    }
}
