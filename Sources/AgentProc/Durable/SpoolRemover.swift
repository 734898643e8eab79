import Synchronization

/// Removes forgotten processes' output spools off the manager's lock and off the start
/// path (a start that evicts the oldest exited process does not wait for its files). At
/// most one removal per forgotten process waits; one task does them in order. ``flush()``
/// waits until none is left (at shutdown).
final class SpoolRemover: Sendable {
    private struct State {
        var pending: [String] = []
        var running = false
        var flushers: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())
    /// Nil when nothing is spooled (then nothing is to remove).
    private let spools: OutputSpoolStore?

    init(spools: OutputSpoolStore?) {
        self.spools = spools
    }

    /// Queues the removal of the spool of `id`.
    func remove(_ id: String) {
        guard spools != nil else { return }
        let start = state.withLock { s -> Bool in
            s.pending.append(id)
            defer { s.running = true }
            return !s.running
        }
        if start { Task.detached { [self] in drain() } }
    }

    /// Returns once every removal queued before the call is done.
    func flush() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { s -> Bool in
                guard s.running else { return true }
                s.flushers.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    private func drain() {
        while true {
            let (next, flushers) = state.withLock { s -> (String?, [CheckedContinuation<Void, Never>]) in
                if !s.pending.isEmpty { return (s.pending.removeFirst(), []) }
                s.running = false
                defer { s.flushers = [] }
                return (nil, s.flushers)
            }
            guard let next else {
                for flusher in flushers { flusher.resume() }
                return
            }
            spools?.remove(id: next)
        }
    }
}
