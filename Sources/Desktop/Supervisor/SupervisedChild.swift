import AgentCore
import CAgentSpawn
import FoundationEssentials
import Glibc
import Synchronization

/// A child process the desktop owns (Xvnc, `portabledesktop up`), spawned on the shared
/// ``ChildReactor``'s thread: the child gets a parent-death signal tied to that thread, which
/// lives as long as the agent, so it dies with the agent even on SIGKILL; the reactor sees its
/// exit the moment it happens (no thread per child).
///
/// Signals reach it only while it has not been reaped (``Child``), so a recycled pid is never
/// signalled.
final class SupervisedChild: Sendable {
    struct SpawnError: Error, CustomStringConvertible {
        var description: String
    }

    private let child: Child
    /// Spawn attempts while the program is busy being written (ETXTBSY).
    static let textBusyAttempts = 5

    private init(child: Child) {
        self.child = child
    }

    /// The child's pid (its process group id too).
    var pid: pid_t { child.pid }

    /// Starts `argv` with `environment`, stdout to `outputFD` and stderr to `errorFD` (or
    /// `outputFD` when -1), in a new process group; `deathSignal` reaches it if the agent dies.
    static func spawn(
        _ argv: [String], environment: [String: String], outputFD: Int32, errorFD: Int32 = -1, deathSignal: Int32 = SIGTERM
    ) async throws(SpawnError)
        -> SupervisedChild
    {
        var spec = ChildSpec(
            executable: argv[0], arguments: argv, environment: ChildSpec.environment(environment), output: outputFD, errors: errorFD)
        spec.parentDeathSignal = deathSignal
        var code: Int32 = 0
        // ETXTBSY: the program was just written and some process still holds it open for
        // writing (a child forked meanwhile, anywhere in this process, inherits such a
        // descriptor until its exec). Transient: tried again, 5 times 20 ms apart.
        for attempt in 0..<Self.textBusyAttempts {
            if attempt > 0 { try? await Task.sleep(for: .milliseconds(20)) }
            do throws(ChildSpawnError) {
                return SupervisedChild(child: try await ChildReactor.shared.spawnOnReactor(spec))
            } catch {
                code = error.errno
                if code != ETXTBSY { break }
            }
        }
        throw SpawnError(description: "\(argv[0]): \(SystemCallError.message(code))")
    }

    var isRunning: Bool { !child.hasExited }

    /// The raw wait status once exited.
    var status: Int32? { child.status }

    /// Sends `signal` to the child's process group if it still runs; false otherwise.
    @discardableResult
    func signal(_ signal: Int32) -> Bool {
        child.signal(signal, to: .group)
    }

    /// Waits for the exit, at most `timeout`; true if it exited.
    func waitForExit(timeout: Duration) async -> Bool {
        await child.exited(within: timeout) != nil
    }

    /// SIGTERM, then SIGKILL after `grace`; returns once it exited (or after the kill's wait).
    func stop(grace: Duration = .seconds(3)) async {
        guard isRunning else { return }
        await child.terminate(SIGTERM, grace: grace, bound: .seconds(2))
    }
}
