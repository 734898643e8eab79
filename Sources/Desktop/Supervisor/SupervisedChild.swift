import AgentCore
import CAgentSpawn
import FoundationEssentials
import Glibc
import Synchronization

/// A child process the desktop owns (Xvnc, `portabledesktop up`), spawned on a thread of its
/// own that then waits for it: the child gets a parent-death signal tied to that thread, so
/// it dies with the agent even on SIGKILL, and its exit is seen the moment it happens.
///
/// Signals reach it only while it has not been reaped (the waiter marks it exited under the
/// lock before reaping), so a recycled pid is never signalled.
final class SupervisedChild: Sendable {
    struct SpawnError: Error, CustomStringConvertible {
        var description: String
    }

    private struct State {
        var pid: pid_t = 0
        var exited = false
        var status: Int32 = 0
    }

    private let state = Mutex(State())
    private let exit = Latch()
    /// Spawn attempts while the program is busy being written (ETXTBSY).
    static let textBusyAttempts = 5

    private init() {}

    /// The child's pid (its process group id too).
    var pid: pid_t { state.withLock { $0.pid } }

    /// Starts `argv` with `environment`, stdout to `outputFD` and stderr to `errorFD` (or
    /// `outputFD` when -1), in a new process group; `deathSignal` reaches it if the agent dies.
    static func spawn(
        _ argv: [String], environment: [String: String], outputFD: Int32, errorFD: Int32 = -1, deathSignal: Int32 = SIGTERM
    ) async throws(SpawnError)
        -> SupervisedChild
    {
        let child = SupervisedChild()
        let envp = environment.map { "\($0.key)=\($0.value)" }
        let failure: SpawnError? = await withCheckedContinuation { continuation in
            AgentThread.start(name: "desktop-child") {
                var step: Int32 = 0
                var code: Int32 = 0
                var pid: pid_t = -1
                // ETXTBSY: the program was just written and some process still holds it open
                // for writing (a child forked meanwhile, anywhere in this process, inherits such
                // a descriptor until its exec). Transient: tried again, 5 times 20 ms apart.
                for attempt in 0..<Self.textBusyAttempts {
                    if attempt > 0 { usleep(20_000) }
                    // Owned: the process API's orphan scan must never reap or signal it.
                    pid = OwnedChildren.spawning {
                        withCStrings(argv) { argvPtr in
                            withCStrings(envp) { envpPtr in
                                argv[0].withCString { path in
                                    var options = agent_spawn_options(
                                        path: path, argv: argvPtr, envp: envpPtr, cwd: nil, output_fd: outputFD,
                                        oom_score_adj: AGENT_SPAWN_KEEP, nice_value: AGENT_SPAWN_KEEP, nofile_soft: -1,
                                        parent_death_signal: deathSignal, error_fd: errorFD, new_session: 0, input_fd: -1, controlling_terminal: 0)
                                    return agent_spawn(&options, &step, &code)
                                }
                            }
                        }
                    }
                    if pid > 0 || code != ETXTBSY { break }
                }
                guard pid > 0 else {
                    child.state.withLock { $0.exited = true }
                    child.exit.open()
                    continuation.resume(returning: SpawnError(description: "\(argv[0]): \(SystemCallError.message(code))"))
                    return
                }
                child.state.withLock { $0.pid = pid }
                continuation.resume(returning: nil)
                // Wait without reaping; mark exited; then reap (the pid stays ours until now).
                var info = siginfo_t()
                while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
                child.state.withLock { s in
                    s.exited = true
                    s.status = OwnedChildren.reap(pid, wait: true) ?? 0
                }
                child.exit.open()
            }
        }
        if let failure { throw failure }
        return child
    }

    var isRunning: Bool { state.withLock { !$0.exited } }

    /// The raw wait status once exited.
    var status: Int32? { state.withLock { $0.exited ? $0.status : nil } }

    /// Sends `signal` to the child's process group if it still runs; false otherwise.
    @discardableResult
    func signal(_ signal: Int32) -> Bool {
        state.withLock { s in
            guard !s.exited else { return false }
            return kill(-s.pid, signal) == 0 || kill(s.pid, signal) == 0
        }
    }

    /// Waits for the exit, at most `timeout`; true if it exited.
    func waitForExit(timeout: Duration) async -> Bool {
        if !isRunning { return true }
        let outcome = await sleep(for: timeout, orUntil: { [exit] in await exit.wait() })
        return outcome == .signalled || !isRunning
    }

    /// SIGTERM, then SIGKILL after `grace`; returns once it exited (or after the kill's wait).
    func stop(grace: Duration = .seconds(3)) async {
        guard signal(SIGTERM) else { return }
        if await waitForExit(timeout: grace) { return }
        signal(SIGKILL)
        _ = await waitForExit(timeout: .seconds(2))
    }
}
