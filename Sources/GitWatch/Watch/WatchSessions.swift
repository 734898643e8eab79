import AgentCore
import ServiceLifecycle
import Synchronization

/// The open watch sockets, so that the agent's shutdown closes each with 1001 (GoingAway),
/// as the reference does, instead of dropping the connection.
///
/// Memory: one latch per open socket.
final class WatchSessions: Service, Sendable {
    private struct State {
        var open: [UInt64: OneShotSignal] = [:]
        var nextID: UInt64 = 0
        var closing = false
    }
    private let state = Mutex(State())

    /// Registers a socket; its latch fires at shutdown (at once if shutdown has begun).
    func register() -> (id: UInt64, closing: OneShotSignal) {
        let signal = OneShotSignal()
        let (id, closing) = state.withLock { s -> (UInt64, Bool) in
            s.nextID += 1
            s.open[s.nextID] = signal
            return (s.nextID, s.closing)
        }
        if closing { signal.fire() }
        return (id, signal)
    }

    func remove(_ id: UInt64) {
        state.withLock { s in _ = s.open.removeValue(forKey: id) }
    }

    /// Waits for graceful shutdown, then tells every socket to close.
    func run() async throws {
        try? await gracefulShutdown()
        let signals = state.withLock { s -> [OneShotSignal] in
            s.closing = true
            return Array(s.open.values)
        }
        for signal in signals { signal.fire() }
    }
}
