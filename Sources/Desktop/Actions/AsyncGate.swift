/// A FIFO lock for async code: one holder at a time, waiters in arrival order. Actions on
/// the one desktop run one at a time, so two requests never interleave their events (the
/// reference's do), and at most one screenshot is in memory.
actor AsyncGate {
    private var held = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func withGate<T: Sendable, E: Error>(_ body: @Sendable () async throws(E) -> T) async throws(E) -> T {
        await enter()
        defer { leave() }
        return try await body()
    }

    private func enter() async {
        if !held {
            held = true
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    private func leave() {
        if waiters.isEmpty {
            held = false
        } else {
            waiters.removeFirst().resume()
        }
    }
}
