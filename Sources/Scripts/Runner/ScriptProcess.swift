import AgentCore
import CAgentSpawn
import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Receives a running script's output on its run thread, in the order read.
protocol ScriptOutputHandler: Sendable {
    /// One chunk read from the script's stdout or stderr (the same pipe for both when the
    /// command merges them).
    func output(_ chunk: UnsafeRawBufferPointer, from stream: ScriptStream)
    /// The run is over: no more output comes (flush partial lines).
    func finished()
}

/// Which of the script's pipes a chunk came from.
enum ScriptStream: Sendable {
    case stdout
    case stderr
}

/// How one run ended, before it is reported.
struct ScriptExit: Sendable, Equatable {
    /// The wire values of `Timing.Status`.
    enum Status: Int, Sendable, Equatable {
        case ok = 0
        case exitFailure = 1
        case timedOut = 2
        case pipesLeftOpen = 3
    }

    var status: Status
    var exitCode: Int32
    /// The run's error as the reference words it (nil for OK).
    var error: String?
    /// The shell's wait status, when it exited while the run was watched.
    var waitStatus: Int32?
    /// The command never started (pipes, fork, chdir or exec failed); `error` says why.
    var startFailed = false
    var start: Date
    var end: Date
}

/// One run of a command in its own session, watched on a dedicated thread: both pipes read
/// until they close, the deadline enforced, cancellation honoured.
///
/// - At the deadline, or on ``cancel()``, the whole process group gets SIGHUP; if the shell
///   still lives 10 s later the group gets SIGKILL (the reference kills only the shell,
///   leaving the rest of the group running).
/// - A shell that exited while something it started still holds the pipes: the run waits
///   10 s for them, then stops reading (`PIPES_LEFT_OPEN` after exit 0, with the reference's
///   warning on stderr; the exit status after a failure). The background child lives on.
/// - The shell stays unreaped (a zombie) until the run is over, so its pid and group id
///   cannot be reused while the run may still signal them.
///
/// Memory: one 64 KiB read buffer per run; the thread ends with the run.
final class ScriptProcess: Sendable {
    /// Grace after the deadline or a cancel before SIGKILL, and wait for pipes after exit.
    static let waitDelay: Duration = .seconds(10)
    static let readBufferBytes = 64 << 10
    /// Full buffers read from one pipe before the deadline and cancel are checked again.
    static let readsPerWake = 16
    static let pipeSize: Int32 = 1 << 20
    static let pipesLeftOpenWarning = """
        WARNING: script exited successfully, but output pipes were not closed after 10s. This usually means a \
        child process was started with references to stdout or stderr. As a result, this process may now have \
        been terminated. Consider redirecting the output or using a separate "coder_script" for the process, \
        see https://coder.com/docs/admin/templates/troubleshooting#startup-script-issues for more information.
        """

    private struct State {
        var cancelled = false
        var pid: pid_t = 0
    }
    private let state = Mutex(State())
    /// Wakes the run thread (cancel); -1 when it could not be made.
    private let wakeFD: Int32

    init() {
        wakeFD = agent_eventfd()
    }

    deinit {
        if wakeFD >= 0 { close(wakeFD) }
    }

    /// The shell's pid while it runs (0 before the spawn).
    var pid: pid_t { state.withLock { $0.pid } }

    /// Ends the run as the reference's cancelled context does: SIGHUP to the group, reported
    /// as `EXIT_FAILURE` with exit code 255.
    func cancel() {
        state.withLock { $0.cancelled = true }
        var one: UInt64 = 1
        if wakeFD >= 0 { _ = write(wakeFD, &one, 8) }
    }

    /// Runs `command` and returns how it ended; `merge` puts stderr on the stdout pipe.
    /// The start failing is an `EXIT_FAILURE` with code 255 and the error text.
    /// `signal` ends the run at its deadline (SIGKILL for metadata commands, as the
    /// reference kills those at once); `waitDelay` is the grace after it and the wait for
    /// pipes a finished shell left open.
    func run(
        _ command: ScriptCommand, timeout: Duration, merge: Bool = false, signal: Int32 = SIGHUP,
        waitDelay: Duration = ScriptProcess.waitDelay, priority: ProcessPriority = .unchanged, handler: some ScriptOutputHandler
    ) async -> ScriptExit {
        await withCheckedContinuation { (continuation: CheckedContinuation<ScriptExit, Never>) in
            AgentThread.start(name: "agent-script") { [self] in
                let exit = runOnThread(
                    command, timeout: timeout, merge: merge, signal: signal, waitDelay: waitDelay, priority: priority, handler: handler)
                continuation.resume(returning: exit)
            }
        }
    }

    private func runOnThread(
        _ command: ScriptCommand, timeout: Duration, merge: Bool, signal: Int32, waitDelay: Duration, priority: ProcessPriority,
        handler: some ScriptOutputHandler
    ) -> ScriptExit {
        let start = Date()
        func failed(_ text: String) -> ScriptExit {
            handler.finished()
            return ScriptExit(status: .exitFailure, exitCode: 255, error: text, startFailed: true, start: start, end: Date())
        }
        var outPipe: [Int32] = [-1, -1]
        var errPipe: [Int32] = [-1, -1]
        guard agent_output_pipe(&outPipe, Self.pipeSize) == 0 else { return failed("start command: pipe: \(SystemCallError.message(errno))") }
        if !merge {
            guard agent_output_pipe(&errPipe, Self.pipeSize) == 0 else {
                close(outPipe[0]); close(outPipe[1])
                return failed("start command: pipe: \(SystemCallError.message(errno))")
            }
        }
        var step: Int32 = 0
        var code: Int32 = 0
        var pidfd: Int32 = -1
        let envp = command.environment.map { "\($0.key)=\($0.value)" }
        let pid = OwnedChildren.spawning { () -> pid_t in
            withCStrings(command.arguments) { argv in
                withCStrings(envp) { env in
                    command.executable.withCString { path in
                        command.directory.withCString { cwd in
                            var options = agent_spawn_options(
                                path: path, argv: argv, envp: env, cwd: cwd, output_fd: outPipe[1],
                                oom_score_adj: priority.oomScoreAdj ?? AGENT_SPAWN_KEEP, nice_value: priority.nice ?? AGENT_SPAWN_KEEP,
                                nofile_soft: -1,
                                parent_death_signal: 0, error_fd: merge ? -1 : errPipe[1], new_session: 1, input_fd: -1, controlling_terminal: 0)
                            return agent_spawn_pidfd(&options, &step, &code, &pidfd)
                        }
                    }
                }
            }
        }
        close(outPipe[1])
        if errPipe[1] >= 0 { close(errPipe[1]) }
        guard pid > 0 else {
            close(outPipe[0])
            if errPipe[0] >= 0 { close(errPipe[0]) }
            let what = step == AGENT_SPAWN_STEP_CHDIR.rawValue ? "chdir \(command.directory)" : "fork/exec \(command.executable)"
            return failed("start command: \(what): \(SystemCallError.message(code))")
        }
        if pidfd < 0 { pidfd = agent_pidfd_open(pid) }
        let alreadyCancelled = state.withLock { s -> Bool in
            s.pid = pid
            return s.cancelled
        }

        var fds: [Int32] = [outPipe[0], errPipe[0]]
        var buffer = [UInt8](repeating: 0, count: Self.readBufferBytes)
        let now = { ContinuousClock.now }
        let deadline: ContinuousClock.Instant? = timeout > .zero ? now() + timeout : nil
        var timedOut = false
        var cancelled = false
        var signalledAt: ContinuousClock.Instant?
        var killed = false
        var exitedAt: ContinuousClock.Instant?
        var waitStatus: Int32?
        var pipesAbandoned = false
        if alreadyCancelled {
            cancelled = true
            signalledAt = now()
            kill(-pid, SIGHUP)
        }

        while true {
            let pipesOpen = fds.contains { $0 >= 0 }
            if exitedAt != nil && !pipesOpen { break }
            // The next moment something must happen without an event.
            var next: ContinuousClock.Instant?
            if exitedAt == nil, !timedOut, !cancelled, let deadline { next = deadline }
            if exitedAt == nil, !killed, let signalledAt { next = min(next ?? signalledAt + waitDelay, signalledAt + waitDelay) }
            if let exitedAt { next = min(next ?? exitedAt + waitDelay, exitedAt + waitDelay) }
            if exitedAt == nil && pidfd < 0 { next = min(next ?? now() + .milliseconds(50), now() + .milliseconds(50)) }
            var polled: [pollfd] = []
            for fd in fds where fd >= 0 { polled.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0)) }
            if exitedAt == nil, pidfd >= 0 { polled.append(pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)) }
            if wakeFD >= 0 { polled.append(pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)) }
            var timeoutMS: Int32 = -1
            if let next {
                let remaining = next - now()
                timeoutMS = remaining <= .zero ? 0 : Int32(min(60_000, remaining / .milliseconds(1) + 1))
            }
            let ready = poll(&polled, nfds_t(polled.count), timeoutMS)
            if ready < 0 && errno != EINTR { usleep(10_000) }

            // Output first, so that nothing written before the exit is lost. At most
            // `readsPerWake` full buffers per pipe and wake-up: a script that writes without
            // pause (`yes`) must not keep the deadline and the cancel from being checked.
            for index in fds.indices where fds[index] >= 0 {
                for _ in 0..<Self.readsPerWake {
                    let n = buffer.withUnsafeMutableBytes { read(fds[index], $0.baseAddress, $0.count) }
                    if n > 0 {
                        buffer.withUnsafeBytes { handler.output(UnsafeRawBufferPointer(rebasing: $0[0..<n]), from: index == 0 ? .stdout : .stderr) }
                        if n < buffer.count { break }
                        continue
                    }
                    if n == 0 || (errno != EAGAIN && errno != EINTR) {
                        close(fds[index])
                        fds[index] = -1
                    }
                    break
                }
            }
            if wakeFD >= 0 {
                var value: UInt64 = 0
                _ = read(wakeFD, &value, 8)
            }
            if exitedAt == nil {
                var status: Int32 = 0
                if agent_peek_exit(pid, &status) == 1 {
                    exitedAt = now()
                    waitStatus = status
                    if pidfd >= 0 { close(pidfd); pidfd = -1 }
                }
            }
            if exitedAt == nil {
                if !cancelled, !timedOut, state.withLock({ $0.cancelled }) {
                    cancelled = true
                    signalledAt = now()
                    kill(-pid, SIGHUP)
                }
                if !timedOut, !cancelled, let deadline, now() >= deadline {
                    timedOut = true
                    signalledAt = now()
                    kill(-pid, signal)
                }
                if !killed, let signalledAt, now() >= signalledAt + waitDelay {
                    killed = true
                    kill(-pid, SIGKILL)
                }
            } else if let exitedAt, fds.contains(where: { $0 >= 0 }), now() >= exitedAt + waitDelay {
                // Something the script started still holds the pipes: stop reading.
                pipesAbandoned = true
                for index in fds.indices where fds[index] >= 0 {
                    close(fds[index])
                    fds[index] = -1
                }
            }
        }
        if pidfd >= 0 { close(pidfd) }

        let exited = waitStatus ?? 0
        let exitCode: Int32 = (exited & 0x7f) == 0 ? (exited >> 8) & 0xff : -1
        var result = ScriptExit(status: .ok, exitCode: 0, error: nil, waitStatus: waitStatus, start: start, end: start)
        if timedOut {
            result.status = .timedOut
            result.exitCode = 255
            result.error = "script timed out"
        } else if cancelled {
            result.status = .exitFailure
            result.exitCode = 255
            result.error = "context canceled"
        } else if exitCode != 0 {
            result.status = .exitFailure
            result.exitCode = exitCode
            result.error = exitCode == -1 ? "signal: \(Self.signalName(exited & 0x7f))" : "exit status \(exitCode)"
        } else if pipesAbandoned {
            result.status = .pipesLeftOpen
            result.exitCode = 255
            result.error = "script exited without closing output pipes"
            Self.pipesLeftOpenWarning.utf8CString.withUnsafeBytes { bytes in
                var line = Array(bytes.dropLast())
                line.append(UInt8(ascii: "\n"))
                line.withUnsafeBytes { handler.output($0, from: .stderr) }
            }
        }
        handler.finished()
        // Reaped only now: until here the pid and the group id stayed ours to signal.
        OwnedChildren.reap(pid, wait: true)
        state.withLock { $0.pid = 0 }
        result.end = Date()
        return result
    }

    /// Go's name for a signal (`killed`, `hangup`, `terminated`), else its number.
    static func signalName(_ signal: Int32) -> String {
        switch signal {
        case SIGHUP: "hangup"
        case SIGINT: "interrupt"
        case SIGKILL: "killed"
        case SIGTERM: "terminated"
        case SIGSEGV: "segmentation fault"
        case SIGABRT: "aborted"
        case SIGPIPE: "broken pipe"
        default: "signal \(signal)"
        }
    }
}
