import Metrics
import Synchronization

/// The SSH sessions running now, across connections: a cap on them and the count the stats
/// report and the metrics read.
///
/// Memory: one integer per running session, at most ``maxSessions``.
final class SessionRegistry: Sendable {
    /// Each running session holds a waiting thread and its process: at most this many.
    let maxSessions: Int
    private let state = Mutex<(next: Int, open: Set<Int>)>((1, []))
    private let gauge = Gauge(label: "agent_ssh_sessions")

    init(maxSessions: Int = 256) {
        self.maxSessions = maxSessions
    }

    /// A new session's number, or nil at the cap.
    func open() -> Int? {
        let id: Int? = state.withLock { s in
            guard s.open.count < maxSessions else { return nil }
            let id = s.next
            s.next += 1
            s.open.insert(id)
            return id
        }
        gauge.record(count)
        return id
    }

    func close(_ id: Int) {
        state.withLock { _ = $0.open.remove(id) }
        gauge.record(count)
    }

    var count: Int { state.withLock { $0.open.count } }
}
