/// A FIFO lock for async code: one holder at a time, waiters in arrival order. Actions on
/// the one desktop run one at a time, so two requests never interleave their events (the
/// reference's do), and at most one screenshot is in memory.
///
/// A waiter whose task is cancelled (its client went away) leaves the queue at once, so
/// requests nobody will read do not pile up behind a long action. Memory: at most
/// ``maxWaiting`` waiting requests (each holding its action, up to 1 MiB of text); one more
/// is turned away at once.
actor AsyncGate {
    /// What came of a request for the gate.
    enum Outcome<T: Sendable>: Sendable {
        case ran(T)
        /// The task was cancelled before its turn came; the body did not run.
        case cancelled
        /// ``maxWaiting`` requests wait already; the body did not run.
        case full

        /// What the body returned, if it ran.
        var value: T? {
            if case .ran(let value) = self { return value }
            return nil
        }
    }

    /// Requests that may wait at once behind the holder.
    static let maxWaiting = 16

    private var held = false
    private var nextID: UInt64 = 0
    private var waiters: [(id: UInt64, continuation: CheckedContinuation<Bool, Never>)] = []

    /// Requests waiting for the gate.
    var waiting: Int { waiters.count }

    /// Runs `body` holding the gate, once the requests before it are done.
    func withGate<T: Sendable, E: Error>(_ body: @Sendable () async throws(E) -> T) async throws(E) -> Outcome<T> {
        guard held == false || waiters.count < Self.maxWaiting else { return .full }
        guard await enter() else { return .cancelled }
        defer { leave() }
        // Cancelled while it waited, but let in before its withdrawal ran (the holder left
        // first): its turn passes on unused.
        if Task.isCancelled { return .cancelled }
        return .ran(try await body())
    }

    /// True once the gate is ours; false if the task was cancelled while it waited.
    private func enter() async -> Bool {
        if !held {
            held = true
            return true
        }
        nextID &+= 1
        let id = nextID
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                if Task.isCancelled {
                    continuation.resume(returning: false)
                } else {
                    waiters.append((id, continuation))
                }
            }
        } onCancel: {
            // Runs after the append above (it needs the actor, which the append holds), or
            // finds the waiter already let in (then `withGate` sees the cancellation and
            // leaves at once).
            Task { await self.withdraw(id) }
        }
    }

    private func withdraw(_ id: UInt64) {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return }
        waiters.remove(at: index).continuation.resume(returning: false)
    }

    private func leave() {
        if waiters.isEmpty {
            held = false
        } else {
            waiters.removeFirst().continuation.resume(returning: true)
        }
    }
}
