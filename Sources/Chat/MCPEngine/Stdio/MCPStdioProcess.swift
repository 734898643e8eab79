import AgentCore
import CAgentSpawn
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A stdio MCP server the agent spawned and owns: its own session and process group, stdin
/// and stdout pipes for newline-delimited JSON-RPC, stderr handed to a log callback line by
/// line (bounded and rate-limited, see ``StderrLines``), all on one thread of its own that
/// polls the pipes, the child's pidfd and a wake-up eventfd.
///
/// Closing runs the MCP stdio shutdown: stdin closed, ``Timing/stdinGrace`` for the server to
/// exit, SIGTERM to its group, ``Timing/termGrace``, SIGKILL to the group. The child stays
/// unreaped (a zombie) until its thread ends, so its pid and group id cannot be reused while
/// they may still be signalled; it is registered in ``OwnedChildren`` meanwhile.
///
/// When the server exits by itself (or on stdin EOF) while processes it started are still in
/// its group, the group gets SIGTERM at once and SIGKILL after ``Timing/termGrace``, before
/// the server is reaped (see ``settleGroup``): its descendants do not outlive it.
///
/// Memory: a 64 KiB read buffer, one unfinished message (``MCPLimits/maxMessageBytes``), one
/// stderr line, and the input not yet written (``MCPLimits/maxPendingInputBytes``, in one
/// contiguous buffer); the message and the input are charged to the shared
/// ``MCPMemoryBudget``. CPU: what the server writes is read at the rates of
/// ``MCPInboundLimiter``; past them the pipes are left unread and the server waits.
public final class MCPStdioProcess: Sendable {
    /// The waits of the shutdown sequence.
    public struct Timing: Sendable {
        public var stdinGrace: Duration
        public var termGrace: Duration
        public init(stdinGrace: Duration = .seconds(5), termGrace: Duration = .seconds(5)) {
            self.stdinGrace = stdinGrace
            self.termGrace = termGrace
        }

        /// The graces when the agent itself stops: at most 2 s each, so that the agent's
        /// shutdown (its work phase, then the final reports) stays within its bound.
        public var hurried: Timing {
            Timing(stdinGrace: min(stdinGrace, .seconds(2)), termGrace: min(termGrace, .seconds(2)))
        }
    }

    static let readBufferBytes = 64 << 10
    /// Full buffers read from one pipe per wake-up, so that a flooding server cannot keep the
    /// thread from its other pipes and deadlines.
    static let readsPerWake = 16
    static let pipeSize: Int32 = 1 << 20

    private struct State {
        /// Encoded messages not yet handed to the writer, back to back.
        var queue: [UInt8] = []
        /// Bytes the writer still has to write, and the capacity of its buffer.
        var writingLeft = 0
        var writingCapacity = 0
        /// The queue's and the writer's buffers, charged to the budget.
        var charge: MCPMemoryCharge
        var closeRequested = false
        var hurried = false
        var ended = false
    }
    private let state: Mutex<State>
    private let wakeFD: Int32
    /// Opens when the server has exited and been reaped; any number of waiters.
    private let done = Latch()
    /// The server's pid (its process group id too).
    public let pid: pid_t
    public let serverName: String

    /// Starts `command`. `events` is called on the server's thread, in order; `stderrLine`
    /// with each stderr line to log.
    /// `owner` keeps it until it is reaped.
    public static func start(
        _ command: MCPStdioCommand, timing: Timing = Timing(), owner: MCPStdioOwner? = nil, budget: MCPMemoryBudget = MCPMemoryBudget(),
        stderrLine: @escaping @Sendable (String) -> Void, events: @escaping @Sendable (MCPStdioEvent) -> Void
    ) throws(MCPError) -> MCPStdioProcess {
        Self.ignoreSIGPIPE
        var inPipe: [Int32] = [-1, -1]
        var outPipe: [Int32] = [-1, -1]
        var errPipe: [Int32] = [-1, -1]
        func closeAll() { for fd in inPipe + outPipe + errPipe where fd >= 0 { Glibc.close(fd) } }
        guard agent_input_pipe(&inPipe) == 0, agent_output_pipe(&outPipe, pipeSize) == 0, agent_output_pipe(&errPipe, pipeSize) == 0 else {
            let code = errno
            closeAll()
            throw MCPError(.start, "start server \(goQuote(command.serverName)): pipe: \(SystemCallError.message(code))")
        }
        let wake = agent_eventfd()
        guard wake >= 0 else {
            let code = errno
            closeAll()
            throw MCPError(.start, "start server \(goQuote(command.serverName)): eventfd: \(SystemCallError.message(code))")
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
                                oom_score_adj: AGENT_SPAWN_KEEP, nice_value: AGENT_SPAWN_KEEP, nofile_soft: -1,
                                parent_death_signal: 0, error_fd: errPipe[1], new_session: 1, input_fd: inPipe[0], controlling_terminal: 0)
                            return agent_spawn_pidfd(&options, &step, &code, &pidfd)
                        }
                    }
                }
            }
        }
        Glibc.close(inPipe[0])
        Glibc.close(outPipe[1])
        Glibc.close(errPipe[1])
        guard pid > 0 else {
            Glibc.close(inPipe[1]); Glibc.close(outPipe[0]); Glibc.close(errPipe[0]); Glibc.close(wake)
            let what = step == AGENT_SPAWN_STEP_CHDIR.rawValue ? "chdir \(command.directory)" : "fork/exec \(command.executable)"
            throw MCPError(.start, "start server \(goQuote(command.serverName)): \(what): \(SystemCallError.message(code))")
        }
        if pidfd < 0 { pidfd = agent_pidfd_open(pid) }
        let process = MCPStdioProcess(pid: pid, serverName: command.serverName, wakeFD: wake, owner: owner, budget: budget)
        owner?.add(process)
        let fds = Descriptors(stdin: inPipe[1], stdout: outPipe[0], stderr: errPipe[0], pidfd: pidfd)
        AgentThread.start(name: "agent-mcp-stdio") {
            process.run(fds, timing: timing, stderrLine: stderrLine, events: events)
        }
        return process
    }

    /// Holds the process until it is reaped (a cycle that ends then).
    private let owner: MCPStdioOwner?

    private let budget: MCPMemoryBudget

    private init(pid: pid_t, serverName: String, wakeFD: Int32, owner: MCPStdioOwner?, budget: MCPMemoryBudget) {
        self.pid = pid
        self.serverName = serverName
        self.wakeFD = wakeFD
        self.owner = owner
        self.budget = budget
        state = Mutex(State(charge: MCPMemoryCharge(budget)))
    }

    deinit { Glibc.close(wakeFD) }

    private static let ignoreSIGPIPE: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

    /// Queues one encoded message for the server's stdin.
    public func send(_ line: [UInt8]) throws(MCPError) {
        let refused: String? = state.withLock { s in
            if s.ended || s.closeRequested { return "server \(goQuote(serverName)) is closed" }
            let waiting = s.queue.count + s.writingLeft
            if waiting + line.count > MCPLimits.maxPendingInputBytes {
                return "server \(goQuote(serverName)) is not reading its input (\(waiting) bytes waiting)"
            }
            // The queue grows as an array does (doubling), charged before it grows.
            let needed = s.queue.count + line.count
            let capacity = needed <= s.queue.capacity ? s.queue.capacity : max(needed, 2 * s.queue.capacity)
            guard s.charge.update(capacity + s.writingCapacity) else {
                MCPFlowMetrics.refused()
                return "server \(goQuote(serverName)): " + budget.refusal("input", bytes: line.count)
            }
            if capacity > s.queue.capacity { s.queue.reserveCapacity(capacity) }
            s.queue.append(contentsOf: line)
            return nil
        }
        if let refused { throw MCPError(.unavailable, refused) }
        wake()
    }

    /// Starts the shutdown sequence (idempotent) without waiting for it; `hurry` shortens its
    /// graces to ``Timing/hurried`` (also once it has begun).
    public func requestClose() { requestClose(hurry: false) }

    public func requestClose(hurry: Bool) {
        state.withLock { s in
            s.closeRequested = true
            if hurry { s.hurried = true }
        }
        wake()
    }

    /// Returns once the server has exited and been reaped, without closing it.
    func waitFinished() async {
        await done.wait()
    }

    /// Shuts the server down and returns once it has exited and been reaped.
    public func close() async {
        requestClose()
        await done.wait()
    }

    /// Whether the server's thread has finished (exited and reaped).
    public var isFinished: Bool { done.isOpen }

    private func wake() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    private struct Descriptors {
        var stdin: Int32
        var stdout: Int32
        var stderr: Int32
        var pidfd: Int32
    }

    private func run(_ initial: Descriptors, timing: Timing, stderrLine: @Sendable (String) -> Void, events: @Sendable (MCPStdioEvent) -> Void) {
        var fds = initial
        var decoder = JSONLineDecoder()
        var lineCharge = MCPMemoryCharge(budget)
        var limiter = MCPInboundLimiter(now: ContinuousClock.now)
        var stderrLines = StderrLines()
        var buffer = [UInt8](repeating: 0, count: Self.readBufferBytes)
        var writing: [UInt8] = []
        var written = 0
        var endReason: String?
        var exitStatus: Int32?
        var closingSince: ContinuousClock.Instant?
        var termSent = false
        var killSent = false
        var exitedAt: ContinuousClock.Instant?
        var group = GroupSweep()
        let now = { ContinuousClock.now }
        let name = serverName

        func end(_ reason: String) {
            guard endReason == nil else { return }
            endReason = reason
            state.withLock { $0.ended = true }
            events(.ended(reason))
        }
        func closeFD(_ fd: inout Int32) {
            if fd >= 0 { Glibc.close(fd) }
            fd = -1
        }
        func startClosing() {
            if closingSince == nil { closingSince = now() }
            closeFD(&fds.stdin)
            state.withLock { s in
                s.queue = []
                s.writingLeft = 0
                s.writingCapacity = 0
                s.charge.release()
            }
            writing = []
        }
        func closeStdout() {
            closeFD(&fds.stdout)
            decoder = JSONLineDecoder()
            lineCharge.release()
        }

        while true {
            if exitedAt != nil && fds.stdout < 0 && fds.stderr < 0 && group.settled { break }
            var next: ContinuousClock.Instant?
            let graces = state.withLock { $0.hurried } ? timing.hurried : timing
            if exitedAt == nil, let closingSince {
                next = termSent ? (killSent ? nil : closingSince + graces.stdinGrace + graces.termGrace) : closingSince + graces.stdinGrace
            }
            // Pipes a descendant still holds after the server exited: a short wait, then dropped.
            if let exitedAt { next = exitedAt + .seconds(1) }
            if exitedAt == nil && fds.pidfd < 0 { next = min(next ?? now() + .milliseconds(50), now() + .milliseconds(50)) }
            // The group's members are looked for again every 50 ms until it is empty.
            if exitedAt != nil, !group.settled { next = min(next ?? now() + GroupSweep.interval, now() + GroupSweep.interval) }
            if writing.isEmpty, fds.stdin >= 0 {
                state.withLock { s in
                    // The writer takes all that is queued at once: one buffer, no copy.
                    if !s.queue.isEmpty {
                        swap(&writing, &s.queue)
                        s.writingLeft = writing.count
                        s.writingCapacity = writing.capacity
                    }
                }
                written = 0
            }
            // A flooding server's pipes are left unread until its rates allow more.
            let readingStdout = fds.stdout >= 0 && limiter.mayRead(now: now())
            let readingStderr = fds.stderr >= 0 && limiter.stderrReadyAt(now: now()) <= now()
            if fds.stdout >= 0, !readingStdout { next = min(next ?? .now + .seconds(60), limiter.readyAt(now: now())) }
            if fds.stderr >= 0, !readingStderr { next = min(next ?? .now + .seconds(60), limiter.stderrReadyAt(now: now())) }
            var polled: [pollfd] = []
            if readingStdout { polled.append(pollfd(fd: fds.stdout, events: Int16(POLLIN), revents: 0)) }
            if readingStderr { polled.append(pollfd(fd: fds.stderr, events: Int16(POLLIN), revents: 0)) }
            if exitedAt == nil, fds.pidfd >= 0 { polled.append(pollfd(fd: fds.pidfd, events: Int16(POLLIN), revents: 0)) }
            if fds.stdin >= 0, !writing.isEmpty { polled.append(pollfd(fd: fds.stdin, events: Int16(POLLOUT), revents: 0)) }
            polled.append(pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0))
            var timeoutMS: Int32 = -1
            if let next {
                let remaining = next - now()
                timeoutMS = remaining <= .zero ? 0 : Int32(min(60_000, remaining / .milliseconds(1) + 1))
            }
            let ready = poll(&polled, nfds_t(polled.count), timeoutMS)
            if ready < 0 && errno != EINTR { usleep(10_000) }
            var wakeValue: UInt64 = 0
            _ = read(wakeFD, &wakeValue, 8)

            // stdout: messages, in order.
            if readingStdout {
                for _ in 0..<Self.readsPerWake {
                    let n = buffer.withUnsafeMutableBytes { read(fds.stdout, $0.baseAddress, $0.count) }
                    if n > 0 {
                        let readAt = now()
                        limiter.read(n, now: readAt)
                        // Charged before the line grows: what the budget refuses is never allocated.
                        if !lineCharge.update(max(lineCharge.bytes, decoder.capacity(afterFeeding: n))) {
                            MCPFlowMetrics.refused()
                            end("server \(goQuote(name)): " + budget.refusal("a message", bytes: decoder.bufferedBytes + n))
                            closeStdout()
                            startClosing()
                            break
                        }
                        var tooLong: JSONLineDecoder.LineTooLong?
                        buffer.withUnsafeBytes { raw in
                            do throws(JSONLineDecoder.LineTooLong) {
                                try decoder.feed(UnsafeRawBufferPointer(rebasing: raw[0..<n])) { line in
                                    do throws(JSONRPCMessage.ParseError) {
                                        let message = try JSONRPCMessage.parse(line)
                                        if limiter.admit(message, now: readAt) {
                                            events(.message(message))
                                        } else {
                                            MCPFlowMetrics.droppedUnsolicited()
                                        }
                                    } catch {
                                        events(.invalid(error.description))
                                    }
                                }
                            } catch {
                                tooLong = error
                            }
                        }
                        if let error = tooLong {
                            end("server \(goQuote(name)) wrote a \(error.description)")
                            closeStdout()
                            startClosing()
                            break
                        }
                        // Down to what the line holds now (a finished message gave its buffer away).
                        _ = lineCharge.update(decoder.bufferedCapacity)
                        if n < buffer.count || !limiter.mayRead(now: now()) { break }
                        continue
                    }
                    if n == 0 || (errno != EAGAIN && errno != EINTR) {
                        closeStdout()
                        if exitedAt == nil { startClosing() }
                    }
                    break
                }
            }
            if readingStderr {
                for _ in 0..<Self.readsPerWake {
                    let n = buffer.withUnsafeMutableBytes { read(fds.stderr, $0.baseAddress, $0.count) }
                    if n > 0 {
                        limiter.readStderr(n, now: now())
                        buffer.withUnsafeBytes { stderrLines.feed(UnsafeRawBufferPointer(rebasing: $0[0..<n]), now: now(), emit: stderrLine) }
                        if n < buffer.count || limiter.stderrReadyAt(now: now()) > now() { break }
                        continue
                    }
                    if n == 0 || (errno != EAGAIN && errno != EINTR) {
                        closeFD(&fds.stderr)
                        stderrLines.finish(now: now(), emit: stderrLine)
                    }
                    break
                }
            }
            // stdin: what is queued, without blocking.
            if fds.stdin >= 0, !writing.isEmpty {
                while written < writing.count {
                    let n = writing.withUnsafeBytes { Glibc.write(fds.stdin, $0.baseAddress! + written, $0.count - written) }
                    if n > 0 {
                        written += n
                        continue
                    }
                    if n < 0 && (errno == EAGAIN || errno == EINTR) { break }
                    // EPIPE: the server closed its stdin; its exit follows.
                    startClosing()
                    break
                }
                if !writing.isEmpty {
                    let done = written >= writing.count
                    if done { writing = [] }
                    state.withLock { s in
                        s.writingLeft = writing.count - (done ? 0 : written)
                        if done {
                            s.writingCapacity = 0
                            _ = s.charge.update(s.queue.capacity)
                        }
                    }
                }
            }
            if fds.stdin >= 0, state.withLock({ $0.closeRequested }) {
                startClosing()
            }
            if exitedAt == nil {
                var status: Int32 = 0
                if agent_peek_exit(pid, &status) == 1 {
                    exitedAt = now()
                    exitStatus = status
                    closeFD(&fds.pidfd)
                    closeFD(&fds.stdin)
                }
            }
            if exitedAt != nil, !group.settled {
                settleGroup(&group, termGrace: graces.termGrace, now: now())
            }
            if exitedAt == nil, let closingSince {
                if !termSent, now() >= closingSince + graces.stdinGrace {
                    termSent = true
                    kill(-pid, SIGTERM)
                }
                if termSent, !killSent, now() >= closingSince + graces.stdinGrace + graces.termGrace {
                    killSent = true
                    kill(-pid, SIGKILL)
                }
            } else if let exitedAt, now() >= exitedAt + .seconds(1) {
                closeStdout()
                if fds.stderr >= 0 {
                    closeFD(&fds.stderr)
                    stderrLines.finish(now: now(), emit: stderrLine)
                }
            }
            if let exitStatus, fds.stdout < 0 {
                end(state.withLock { $0.closeRequested } ? "server \(goQuote(name)) was closed" : "server \(goQuote(name)) exited (\(Self.describe(exitStatus)))")
            }
        }
        closeFD(&fds.stdin)
        closeFD(&fds.pidfd)
        lineCharge.release()
        state.withLock { s in
            s.queue = []
            s.charge.release()
        }
        // Reaped only now: until here the pid and the group id stayed ours to signal.
        owner?.remove(pid)
        OwnedChildren.reap(pid, wait: true)
        end("server \(goQuote(name)) exited")
        done.open()
    }

    /// Where the sweep of the exited server's process group stands.
    struct GroupSweep {
        static let interval: Duration = .milliseconds(50)
        /// After SIGKILL, how long members may take to die (one in uninterruptible sleep)
        /// before the server is reaped anyway.
        static let killBound: Duration = .seconds(1)
        var termSentAt: ContinuousClock.Instant?
        var killSentAt: ContinuousClock.Instant?
        var settled = false
    }

    /// One step of the sweep after the server (the group's leader) exited: SIGTERM to the
    /// group when members are alive, SIGKILL after `termGrace`, settled when none is left (or
    /// ``GroupSweep/killBound`` after the SIGKILL).
    ///
    /// Why signalling `-pid` reaches only what the agent owns: the server was the agent's
    /// child and made its own session and group (pgid = pid) before exec. It is not reaped
    /// before the sweep settles, so its pid, and with it the group id, stays allocated and no
    /// other process or group can take it. A process can only join a group of its own
    /// session, so the group holds the server's descendants and nothing else; one that left
    /// it (`setsid`, `setpgid`) is not signalled.
    private func settleGroup(_ group: inout GroupSweep, termGrace: Duration, now: ContinuousClock.Instant) {
        guard ProcessGroupScan.hasOtherMembers(group: pid, leader: pid) else {
            group.settled = true
            return
        }
        guard let termSentAt = group.termSentAt else {
            group.termSentAt = now
            kill(-pid, SIGTERM)
            return
        }
        if let killSentAt = group.killSentAt {
            if now >= killSentAt + GroupSweep.killBound { group.settled = true }
        } else if now >= termSentAt + termGrace {
            group.killSentAt = now
            kill(-pid, SIGKILL)
        }
    }

    /// A wait status as Go's `ProcessState.String` words it.
    static func describe(_ status: Int32) -> String {
        if status & 0x7f == 0 { return "exit status \((status >> 8) & 0xff)" }
        let signal = status & 0x7f
        return switch signal {
        case SIGKILL: "signal: killed"
        case SIGTERM: "signal: terminated"
        case SIGSEGV: "signal: segmentation fault"
        case SIGABRT: "signal: aborted"
        default: "signal: \(signal)"
        }
    }
}
