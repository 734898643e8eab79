import Glibc
import Synchronization

/// The stdio servers one engine started and that are not reaped yet, connected or still
/// connecting: what it shuts down when the agent stops, and kills at once when the agent's
/// shutdown overruns its bound.
///
/// A process leaves before it is reaped, under the lock ``killAll()`` holds while
/// signalling, so a signal never reaches a reused pid. Memory: one entry per live server.
public final class MCPStdioOwner: Sendable {
    private let processes = Mutex<[pid_t: MCPStdioProcess]>([:])

    public init() {}

    func add(_ process: MCPStdioProcess) { processes.withLock { $0[process.pid] = process } }

    /// Called by the process before it is reaped.
    func remove(_ pid: pid_t) { _ = processes.withLock { $0.removeValue(forKey: pid) } }

    /// Servers alive now.
    public var count: Int { processes.withLock { $0.count } }

    /// Shuts every server down with the shutdown graces (``MCPStdioProcess/Timing/hurried``)
    /// and returns once all have exited; not cut short by the caller's cancellation.
    public func closeAll() async {
        let all = processes.withLock { Array($0.values) }
        for process in all { process.requestClose(hurry: true) }
        await Task {
            for process in all { await process.waitFinished() }
        }.value
    }

    /// SIGKILL to every live server's process group; never blocks beyond the lock.
    public func killAll() {
        processes.withLock { processes in
            for pid in processes.keys { kill(-pid, SIGKILL) }
        }
    }
}
