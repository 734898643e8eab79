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

/// One run of a command in its own session, watched on the shared ``ChildReactor`` (no
/// thread per run): both pipes read until they close, the deadline enforced, cancellation
/// honoured.
///
/// - At the deadline, or on ``cancel()``, the whole process group gets SIGHUP; if the shell
///   still lives 10 s later the group gets SIGKILL (the reference kills only the shell,
///   leaving the rest of the group running).
/// - A shell that exited while something it started still holds the pipes: the run waits
///   10 s for them, then stops reading (`PIPES_LEFT_OPEN` after exit 0, with the reference's
///   warning on stderr; the exit status after a failure). The background child lives on.
/// - The shell stays unreaped (a zombie) until the run is over, so its pid and group id
///   cannot be reused while the run may still signal them.
/// - The handler is called on the reactor's thread, in the order read.
///
/// Memory: one 64 KiB read buffer per run, held until the run is over.
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
        var run: ScriptRun?
    }
    private let state = Mutex(State())
    private let reactor: ChildReactor

    init(reactor: ChildReactor = .shared) {
        self.reactor = reactor
    }

    /// The shell's pid while it runs (0 before the spawn).
    var pid: pid_t { state.withLock { $0.pid } }

    /// Ends the run as the reference's cancelled context does: SIGHUP to the group, reported
    /// as `EXIT_FAILURE` with exit code 255.
    func cancel() {
        let run = state.withLock { s -> ScriptRun? in
            s.cancelled = true
            return s.run
        }
        run?.cancel()
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
        let start = Date()
        func failed(_ text: String) -> ScriptExit {
            handler.finished()
            return ScriptExit(status: .exitFailure, exitCode: 255, error: text, startFailed: true, start: start, end: Date())
        }
        guard let out = ChildPipe.output(size: Self.pipeSize) else { return failed("start command: pipe: \(SystemCallError.message(errno))") }
        var err: (read: Int32, write: Int32)?
        if !merge {
            err = ChildPipe.output(size: Self.pipeSize)
            guard err != nil else {
                let code = errno
                close(out.read)
                close(out.write)
                return failed("start command: pipe: \(SystemCallError.message(code))")
            }
        }
        var spec = ChildSpec(
            executable: command.executable, arguments: command.arguments, environment: ChildSpec.environment(command.environment),
            directory: command.directory, output: out.write, errors: err?.write ?? -1, grouping: .newSession, reaping: .whenReleased)
        spec.oomScoreAdj = priority.oomScoreAdj
        spec.nice = priority.nice
        let child: Child
        do throws(ChildSpawnError) {
            child = try reactor.spawn(spec)
        } catch {
            for fd in [out.read, out.write, err?.read ?? -1, err?.write ?? -1] where fd >= 0 { close(fd) }
            let what = error.step == .directory ? "chdir \(command.directory)" : "fork/exec \(command.executable)"
            return failed("start command: \(what): \(SystemCallError.message(error.errno))")
        }
        close(out.write)
        if let err { close(err.write) }
        let exit = await withCheckedContinuation { (continuation: CheckedContinuation<ScriptExit, Never>) in
            let run = ScriptRun(
                child: child, reactor: reactor, timeout: timeout, signal: signal, waitDelay: waitDelay, start: start, handler: handler,
                continuation: continuation)
            let alreadyCancelled = state.withLock { s -> Bool in
                s.pid = child.pid
                s.run = run
                return s.cancelled
            }
            run.start(output: out.read, errors: err?.read)
            if alreadyCancelled { run.cancel() }
        }
        state.withLock { s in
            s.pid = 0
            s.run = nil
        }
        return exit
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

/// One run's events on the reactor: output, the shell's exit, the deadline and the graces.
/// Every step is taken under the lock; the handler is called outside it, on the reactor's
/// thread only (so in order).
private final class ScriptRun: Sendable {
    private struct State {
        var tokens: [UInt64] = []
        var openPipes = 0
        var timers: [UInt64] = []
        var exitedAt: ContinuousClock.Instant?
        var waitStatus: Int32?
        var timedOut = false
        var cancelled = false
        var signalled = false
        var killed = false
        var pipesAbandoned = false
        var continuation: CheckedContinuation<ScriptExit, Never>?
    }

    private let child: Child
    private let reactor: ChildReactor
    private let timeout: Duration
    private let signal: Int32
    private let waitDelay: Duration
    private let startDate: Date
    private let handler: any ScriptOutputHandler
    private let state: Mutex<State>
    /// The read buffer, used on the reactor's thread only (its handlers never run at once).
    private let buffer: Mutex<[UInt8]>

    init(
        child: Child, reactor: ChildReactor, timeout: Duration, signal: Int32, waitDelay: Duration, start: Date,
        handler: any ScriptOutputHandler, continuation: CheckedContinuation<ScriptExit, Never>
    ) {
        self.child = child
        self.reactor = reactor
        self.timeout = timeout
        self.signal = signal
        self.waitDelay = waitDelay
        self.startDate = start
        self.handler = handler
        state = Mutex(State(continuation: continuation))
        buffer = Mutex([UInt8](repeating: 0, count: ScriptProcess.readBufferBytes))
    }

    func start(output: Int32, errors: Int32?) {
        let pipes = [(output, ScriptStream.stdout)] + (errors.map { [($0, ScriptStream.stderr)] } ?? [])
        state.withLock { $0.openPipes = pipes.count }
        let tokens = pipes.map { fd, stream in
            reactor.watchReadable(fd, closed: { self.pipeClosed() }) { self.read($0, stream) }
        }
        let deadline: UInt64? = timeout > .zero ? reactor.schedule(at: .now + timeout) { self.deadlinePassed() } : nil
        state.withLock { s in
            s.tokens = tokens
            if let deadline { s.timers.append(deadline) }
        }
        child.onExit { status in self.exited(status) }
    }

    /// Up to ``ScriptProcess/readsPerWake`` full buffers: a script that writes without pause
    /// (`yes`) must not keep the deadline and the cancel from being served.
    private func read(_ fd: Int32, _ stream: ScriptStream) -> ChildReactor.ReadOutcome {
        buffer.withLock { buffer in
            for _ in 0..<ScriptProcess.readsPerWake {
                let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
                if n > 0 {
                    buffer.withUnsafeBytes { handler.output(UnsafeRawBufferPointer(rebasing: $0[0..<n]), from: stream) }
                    if n < buffer.count { return .keep }
                    continue
                }
                if n == 0 || (errno != EAGAIN && errno != EINTR) { return .close }
                return .keep
            }
            return .keep
        }
    }

    func cancel() {
        let first = state.withLock { s -> Bool in
            guard s.exitedAt == nil, !s.cancelled, !s.timedOut, s.continuation != nil else { return false }
            s.cancelled = true
            return true
        }
        if first { signalGroup(SIGHUP) }
    }

    private func deadlinePassed() {
        let first = state.withLock { s -> Bool in
            guard s.exitedAt == nil, !s.cancelled, !s.timedOut else { return false }
            s.timedOut = true
            return true
        }
        if first { signalGroup(signal) }
    }

    /// The deadline's or the cancel's signal, then SIGKILL after the grace if the shell lives.
    private func signalGroup(_ signal: Int32) {
        child.signal(signal, to: .group)
        let kill = reactor.schedule(at: .now + waitDelay) { self.killIfRunning() }
        state.withLock { $0.timers.append(kill) }
    }

    private func killIfRunning() {
        let due = state.withLock { s -> Bool in
            guard s.exitedAt == nil, !s.killed else { return false }
            s.killed = true
            return true
        }
        if due { child.signal(SIGKILL, to: .group) }
    }

    private func exited(_ status: Int32) {
        let pipesOpen = state.withLock { s -> Bool in
            s.exitedAt = .now
            s.waitStatus = status
            return s.openPipes > 0
        }
        guard pipesOpen else { return finish() }
        // Something the script started may still hold the pipes: wait for them, then stop reading.
        let abandon = reactor.schedule(at: .now + waitDelay) { self.abandonPipes() }
        state.withLock { $0.timers.append(abandon) }
    }

    private func abandonPipes() {
        let tokens = state.withLock { s -> [UInt64] in
            guard s.openPipes > 0 else { return [] }
            s.pipesAbandoned = true
            return s.tokens
        }
        for token in tokens { reactor.closeReadable(token) }
    }

    private func pipeClosed() {
        let done = state.withLock { s -> Bool in
            s.openPipes -= 1
            return s.openPipes == 0 && s.exitedAt != nil
        }
        if done { finish() }
    }

    private func finish() {
        let taken = state.withLock { s -> (State, CheckedContinuation<ScriptExit, Never>)? in
            guard let continuation = s.continuation else { return nil }
            s.continuation = nil
            return (s, continuation)
        }
        guard let (s, continuation) = taken else { return }
        for timer in s.timers { reactor.cancelTimer(timer) }
        let exited = s.waitStatus ?? 0
        let exitCode: Int32 = (exited & 0x7f) == 0 ? (exited >> 8) & 0xff : -1
        var result = ScriptExit(status: .ok, exitCode: 0, error: nil, waitStatus: s.waitStatus, start: startDate, end: startDate)
        if s.timedOut {
            result.status = .timedOut
            result.exitCode = 255
            result.error = "script timed out"
        } else if s.cancelled {
            result.status = .exitFailure
            result.exitCode = 255
            result.error = "context canceled"
        } else if exitCode != 0 {
            result.status = .exitFailure
            result.exitCode = exitCode
            result.error = exitCode == -1 ? "signal: \(ScriptProcess.signalName(exited & 0x7f))" : "exit status \(exitCode)"
        } else if s.pipesAbandoned {
            result.status = .pipesLeftOpen
            result.exitCode = 255
            result.error = "script exited without closing output pipes"
            ScriptProcess.pipesLeftOpenWarning.utf8CString.withUnsafeBytes { bytes in
                var line = Array(bytes.dropLast())
                line.append(UInt8(ascii: "\n"))
                line.withUnsafeBytes { handler.output($0, from: .stderr) }
            }
        }
        handler.finished()
        // Reaped only now: until here the pid and the group id stayed ours to signal.
        child.release()
        result.end = Date()
        continuation.resume(returning: result)
    }
}
