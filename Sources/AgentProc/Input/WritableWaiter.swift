import AgentCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Wakes writers waiting for a full pipe or terminal to take more bytes, as a client of the
/// agent's one ``ChildReactor`` (no thread of its own): each wait is a one-shot writability
/// watch and a reactor timer for its deadline.
///
/// A wait ends when the descriptor becomes writable (or reports an error), when its deadline
/// passes, or when the waiting task is cancelled, whichever is first.
/// Memory: one small record per waiting writer; writers wait one at a time per process
/// (``ProcessInput`` serializes them), so at most one per process with stdin.
final class WritableWaiter: ChildReactor.Client {
    static let shared = WritableWaiter(reactor: .shared)

    private struct Waiting {
        var fd: Int32
        var continuation: CheckedContinuation<Bool, Never>
        var timer: UInt64?
    }

    private struct State {
        var waiting: [UInt64: Waiting] = [:]
        var nextToken: UInt64 = 1
    }

    private let reactor: ChildReactor
    private let registration: ChildReactor.Registration
    private let state = Mutex(State())

    /// `firstToken`: where the waits' tokens start (tests start them at the end of the range).
    init(reactor: ChildReactor, firstToken: UInt64 = 1) {
        self.reactor = reactor
        registration = reactor.register()
        state.withLock { $0.nextToken = firstToken }
        registration.serve(self)
    }

    /// True when `fd` can take bytes now (or has an error a write will report); false when
    /// `timeout` passed first or the task was cancelled.
    func waitWritable(_ fd: Int32, timeout: Duration) async -> Bool {
        // Tokens go round within the reactor's client words; one still waiting is never
        // reused (at most one wait per process is out, so the skip is short).
        let token = state.withLock { s -> UInt64 in
            while s.waiting[s.nextToken] != nil { s.nextToken = Self.after(s.nextToken) }
            defer { s.nextToken = Self.after(s.nextToken) }
            return s.nextToken
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let added = state.withLock { s -> Bool in
                    guard !Task.isCancelled else { return false }
                    s.waiting[token] = Waiting(fd: fd, continuation: continuation)
                    if !registration.addWritable(fd, word: token) {
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
                // The deadline's timer starts once the wait is registered, so it cannot fire
                // first and be lost.
                let timer = reactor.schedule(at: .now + timeout) { [self] in finish(token, writable: false) }
                let stale = state.withLock { s -> Bool in
                    guard s.waiting[token] != nil else { return true }
                    s.waiting[token]?.timer = timer
                    return false
                }
                if stale { reactor.cancelTimer(timer) }
            }
        } onCancel: {
            self.finish(token, writable: false)
        }
    }

    private static func after(_ token: UInt64) -> UInt64 {
        token >= ChildReactor.maxClientWord ? 1 : token + 1
    }

    /// Ends a wait once (whichever of event, deadline and cancellation comes first).
    private func finish(_ token: UInt64, writable: Bool) {
        let waiting = state.withLock { s -> Waiting? in
            guard let waiting = s.waiting.removeValue(forKey: token) else { return nil }
            registration.remove(waiting.fd)
            return waiting
        }
        guard let waiting else { return }
        if let timer = waiting.timer { reactor.cancelTimer(timer) }
        waiting.continuation.resume(returning: writable)
    }

    // MARK: On the reactor's thread

    func ready(_ word: UInt64, scratch: UnsafeMutableRawBufferPointer) {
        finish(word, writable: true)
    }

    func tick(now: ContinuousClock.Instant, scratch: UnsafeMutableRawBufferPointer) -> ContinuousClock.Instant? {
        nil
    }

    /// Never: the waiter serves the agent's whole life.
    func detached() {}
}
