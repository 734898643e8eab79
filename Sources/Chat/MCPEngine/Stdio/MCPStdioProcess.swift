import AgentCore
import CAgentSpawn
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A stdio MCP server the agent spawned and owns: its own session and process group, stdin
/// and stdout pipes for newline-delimited JSON-RPC, stderr handed to a log callback line by
/// line (bounded and rate-limited, see ``StderrLines``), all as one machine the shared
/// ``ChildReactor`` steps when a pipe is ready, a deadline comes, the child exits or a message
/// is queued (no thread per server).
///
/// Closing runs the MCP stdio shutdown: stdin closed, ``Timing/stdinGrace`` for the server to
/// exit, SIGTERM to its group, ``Timing/termGrace``, SIGKILL to the group. The child stays
/// unreaped (a zombie) until its machine ends, so its pid and group id cannot be reused while
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
    /// The server's child on the shared reactor.
    let child: Child
    /// The machine's handle (set once, right after the start).
    fileprivate let driven = Mutex<ChildReactor.Driven?>(nil)
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
        var spec = ChildSpec(
            executable: command.executable, arguments: command.arguments, environment: ChildSpec.environment(command.environment),
            directory: command.directory, input: inPipe[0], output: outPipe[1], errors: errPipe[1], grouping: .newSession,
            reaping: .whenReleased)
        spec.input = inPipe[0]
        let child: Child
        do throws(ChildSpawnError) {
            child = try ChildReactor.shared.spawn(spec)
        } catch {
            closeAll()
            let what = error.step == .directory ? "chdir \(command.directory)" : "fork/exec \(command.executable)"
            throw MCPError(.start, "start server \(goQuote(command.serverName)): \(what): \(SystemCallError.message(error.errno))")
        }
        Glibc.close(inPipe[0])
        Glibc.close(outPipe[1])
        Glibc.close(errPipe[1])
        let process = MCPStdioProcess(child: child, serverName: command.serverName, owner: owner, budget: budget)
        owner?.add(process)
        let machine = StdioMachine(
            process: process, stdin: inPipe[1], stdout: outPipe[0], stderr: errPipe[0], timing: timing, stderrLine: stderrLine,
            events: events)
        let driven = ChildReactor.shared.drive { machine.step($0) }
        process.driven.withLock { $0 = driven }
        child.onExit { _ in driven.wake() }
        return process
    }

    /// Holds the process until it is reaped (a cycle that ends then).
    private let owner: MCPStdioOwner?

    private let budget: MCPMemoryBudget

    private init(child: Child, serverName: String, owner: MCPStdioOwner?, budget: MCPMemoryBudget) {
        self.child = child
        self.pid = child.pid
        self.serverName = serverName
        self.owner = owner
        self.budget = budget
        state = Mutex(State(charge: MCPMemoryCharge(budget)))
    }

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

    /// Whether the server's machine has finished (exited and reaped).
    public var isFinished: Bool { done.isOpen }

    private func wake() {
        driven.withLock { $0 }?.wake()
    }

    /// The server's loop as a machine the reactor steps: each step does what the old loop's
    /// pass after its `poll` did (read, write, exit, deadlines), then says what to wait for.
    /// Its state is touched on the reactor's thread only (the lock is never contended).
    final class StdioMachine: Sendable {
        private struct Loop {
            var stdin: Int32
            var stdout: Int32
            var stderr: Int32
            var decoder = JSONLineDecoder()
            var lineCharge: MCPMemoryCharge
            var limiter = MCPInboundLimiter(now: ContinuousClock.now)
            var stderrLines = StderrLines()
            var buffer = [UInt8](repeating: 0, count: MCPStdioProcess.readBufferBytes)
            var writing: [UInt8] = []
            var written = 0
            var endReason: String?
            var exitStatus: Int32?
            var closingSince: ContinuousClock.Instant?
            var termSent = false
            var killSent = false
            var exitedAt: ContinuousClock.Instant?
            var group = GroupSweep()
            /// What the last step asked to read (the limiter may hold a pipe back).
            var readingStdout = false
            var readingStderr = false
        }

        private let process: MCPStdioProcess
        private let timing: Timing
        private let stderrLine: @Sendable (String) -> Void
        private let events: @Sendable (MCPStdioEvent) -> Void
        private let loop: Mutex<Loop>

        init(
            process: MCPStdioProcess, stdin: Int32, stdout: Int32, stderr: Int32, timing: Timing,
            stderrLine: @escaping @Sendable (String) -> Void, events: @escaping @Sendable (MCPStdioEvent) -> Void
        ) {
            self.process = process
            self.timing = timing
            self.stderrLine = stderrLine
            self.events = events
            loop = Mutex(Loop(stdin: stdin, stdout: stdout, stderr: stderr, lineCharge: MCPMemoryCharge(process.budget)))
        }

        func step(_ driven: ChildReactor.Driven) -> ChildReactor.Interest? {
            loop.withLock { l in
                // The first step too: a close requested before it ran is seen at once.
                pass(&l, driven)
                if l.exitedAt != nil && l.stdout < 0 && l.stderr < 0 && l.group.settled {
                    finish(&l, driven)
                    return nil
                }
                return interest(&l)
            }
        }

        private func end(_ l: inout Loop, _ reason: String) {
            guard l.endReason == nil else { return }
            l.endReason = reason
            process.state.withLock { $0.ended = true }
            events(.ended(reason))
        }

        private func closeFD(_ fd: inout Int32, _ driven: ChildReactor.Driven) {
            if fd >= 0 { driven.close(fd) }
            fd = -1
        }

        private func startClosing(_ l: inout Loop, _ driven: ChildReactor.Driven) {
            if l.closingSince == nil { l.closingSince = .now }
            closeFD(&l.stdin, driven)
            process.state.withLock { s in
                s.queue = []
                s.writingLeft = 0
                s.writingCapacity = 0
                s.charge.release()
            }
            l.writing = []
        }

        private func closeStdout(_ l: inout Loop, _ driven: ChildReactor.Driven) {
            closeFD(&l.stdout, driven)
            l.decoder = JSONLineDecoder()
            l.lineCharge.release()
        }

        /// The top of the old loop: the next deadline, the writer's buffer, which pipes to read.
        private func interest(_ l: inout Loop) -> ChildReactor.Interest {
            let now = { ContinuousClock.now }
            var next: ContinuousClock.Instant?
            let graces = process.state.withLock { $0.hurried } ? timing.hurried : timing
            if l.exitedAt == nil, let closingSince = l.closingSince {
                next = l.termSent ? (l.killSent ? nil : closingSince + graces.stdinGrace + graces.termGrace) : closingSince + graces.stdinGrace
            }
            // Pipes a descendant still holds after the server exited: a short wait, then dropped.
            if let exitedAt = l.exitedAt { next = exitedAt + .seconds(1) }
            // The group's members are looked for again every 50 ms until it is empty.
            if l.exitedAt != nil, !l.group.settled { next = min(next ?? now() + GroupSweep.interval, now() + GroupSweep.interval) }
            if l.writing.isEmpty, l.stdin >= 0 {
                var writing = l.writing
                process.state.withLock { s in
                    // The writer takes all that is queued at once: one buffer, no copy.
                    if !s.queue.isEmpty {
                        swap(&writing, &s.queue)
                        s.writingLeft = writing.count
                        s.writingCapacity = writing.capacity
                    }
                }
                l.writing = writing
                l.written = 0
            }
            // A flooding server's pipes are left unread until its rates allow more.
            l.readingStdout = l.stdout >= 0 && l.limiter.mayRead(now: now())
            l.readingStderr = l.stderr >= 0 && l.limiter.stderrReadyAt(now: now()) <= now()
            if l.stdout >= 0, !l.readingStdout { next = min(next ?? .now + .seconds(60), l.limiter.readyAt(now: now())) }
            if l.stderr >= 0, !l.readingStderr { next = min(next ?? .now + .seconds(60), l.limiter.stderrReadyAt(now: now())) }
            var interest = ChildReactor.Interest(until: next)
            if l.readingStdout { interest.read.append(l.stdout) }
            if l.readingStderr { interest.read.append(l.stderr) }
            if l.stdin >= 0, !l.writing.isEmpty { interest.write.append(l.stdin) }
            return interest
        }

        /// The rest of the old loop's pass: read, write, the exit, the deadlines.
        private func pass(_ l: inout Loop, _ driven: ChildReactor.Driven) {
            let now = { ContinuousClock.now }
            let name = process.serverName
            let budget = process.budget
            let graces = process.state.withLock { $0.hurried } ? timing.hurried : timing
            // stdout: messages, in order.
            if l.readingStdout && l.stdout >= 0 {
                for _ in 0..<MCPStdioProcess.readsPerWake {
                    let fd = l.stdout
                    let n = l.buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                    if n > 0 {
                        let readAt = now()
                        l.limiter.read(n, now: readAt)
                        // Charged before the line grows: what the budget refuses is never allocated.
                        if !l.lineCharge.update(max(l.lineCharge.bytes, l.decoder.capacity(afterFeeding: n))) {
                            MCPFlowMetrics.refused()
                            end(&l, "server \(goQuote(name)): " + budget.refusal("a message", bytes: l.decoder.bufferedBytes + n))
                            closeStdout(&l, driven)
                            startClosing(&l, driven)
                            break
                        }
                        var tooLong: JSONLineDecoder.LineTooLong?
                        // Moved out while the buffer is read (one owner: no copy of the line).
                        var decoder = l.decoder
                        l.decoder = JSONLineDecoder()
                        var limiter = l.limiter
                        let events = self.events
                        l.buffer.withUnsafeBytes { raw in
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
                        l.decoder = decoder
                        l.limiter = limiter
                        if let error = tooLong {
                            end(&l, "server \(goQuote(name)) wrote a \(error.description)")
                            closeStdout(&l, driven)
                            startClosing(&l, driven)
                            break
                        }
                        // Down to what the line holds now (a finished message gave its buffer away).
                        _ = l.lineCharge.update(l.decoder.bufferedCapacity)
                        if n < l.buffer.count || !l.limiter.mayRead(now: now()) { break }
                        continue
                    }
                    if n == 0 || (errno != EAGAIN && errno != EINTR) {
                        closeStdout(&l, driven)
                        if l.exitedAt == nil { startClosing(&l, driven) }
                    }
                    break
                }
            }
            if l.readingStderr && l.stderr >= 0 {
                for _ in 0..<MCPStdioProcess.readsPerWake {
                    let fd = l.stderr
                    let n = l.buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                    if n > 0 {
                        l.limiter.readStderr(n, now: now())
                        var lines = l.stderrLines
                        l.stderrLines = StderrLines()
                        l.buffer.withUnsafeBytes { lines.feed(UnsafeRawBufferPointer(rebasing: $0[0..<n]), now: now(), emit: stderrLine) }
                        l.stderrLines = lines
                        if n < l.buffer.count || l.limiter.stderrReadyAt(now: now()) > now() { break }
                        continue
                    }
                    if n == 0 || (errno != EAGAIN && errno != EINTR) {
                        closeFD(&l.stderr, driven)
                        l.stderrLines.finish(now: now(), emit: stderrLine)
                    }
                    break
                }
            }
            // stdin: what is queued, without blocking.
            if l.stdin >= 0, !l.writing.isEmpty {
                while l.written < l.writing.count {
                    let fd = l.stdin
                    let written = l.written
                    let n = l.writing.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, $0.count - written) }
                    if n > 0 {
                        l.written += n
                        continue
                    }
                    if n < 0 && (errno == EAGAIN || errno == EINTR) { break }
                    // EPIPE: the server closed its stdin; its exit follows.
                    startClosing(&l, driven)
                    break
                }
                if !l.writing.isEmpty {
                    let done = l.written >= l.writing.count
                    if done { l.writing = [] }
                    let left = l.writing.count - (done ? 0 : l.written)
                    process.state.withLock { s in
                        s.writingLeft = left
                        if done {
                            s.writingCapacity = 0
                            _ = s.charge.update(s.queue.capacity)
                        }
                    }
                }
            }
            if l.stdin >= 0, process.state.withLock({ $0.closeRequested }) {
                startClosing(&l, driven)
            }
            if l.exitedAt == nil, let status = process.child.status {
                l.exitedAt = now()
                l.exitStatus = status
                closeFD(&l.stdin, driven)
            }
            if l.exitedAt != nil, !l.group.settled {
                process.settleGroup(&l.group, termGrace: graces.termGrace, now: now())
            }
            if l.exitedAt == nil, let closingSince = l.closingSince {
                if !l.termSent, now() >= closingSince + graces.stdinGrace {
                    l.termSent = true
                    process.child.signal(SIGTERM, to: .group)
                }
                if l.termSent, !l.killSent, now() >= closingSince + graces.stdinGrace + graces.termGrace {
                    l.killSent = true
                    process.child.signal(SIGKILL, to: .group)
                }
            } else if let exitedAt = l.exitedAt, now() >= exitedAt + .seconds(1) {
                closeStdout(&l, driven)
                if l.stderr >= 0 {
                    closeFD(&l.stderr, driven)
                    l.stderrLines.finish(now: now(), emit: stderrLine)
                }
            }
            if let exitStatus = l.exitStatus, l.stdout < 0 {
                end(
                    &l,
                    process.state.withLock { $0.closeRequested }
                        ? "server \(goQuote(name)) was closed" : "server \(goQuote(name)) exited (\(MCPStdioProcess.describe(exitStatus)))")
            }
        }

        /// After the old loop: everything released, the server reaped, waiters told.
        private func finish(_ l: inout Loop, _ driven: ChildReactor.Driven) {
            closeFD(&l.stdin, driven)
            l.lineCharge.release()
            process.state.withLock { s in
                s.queue = []
                s.charge.release()
            }
            // Reaped only now: until here the pid and the group id stayed ours to signal.
            process.owner?.remove(process.pid)
            process.child.release()
            end(&l, "server \(goQuote(process.serverName)) exited")
            process.done.open()
        }
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
    fileprivate func settleGroup(_ group: inout GroupSweep, termGrace: Duration, now: ContinuousClock.Instant) {
        guard ProcessGroupScan.hasOtherMembers(group: pid, leader: pid) else {
            group.settled = true
            return
        }
        guard let termSentAt = group.termSentAt else {
            group.termSentAt = now
            child.signal(SIGTERM, to: .group)
            return
        }
        if let killSentAt = group.killSentAt {
            if now >= killSentAt + GroupSweep.killBound { group.settled = true }
        } else if now >= termSentAt + termGrace {
            group.killSentAt = now
            child.signal(SIGKILL, to: .group)
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
