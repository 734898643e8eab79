import CAgentSpawn
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The one thread that watches the agent's children outside the process API (which has its
/// own output fast path): an epoll set over each child's pidfd, the descriptors capabilities
/// read their children's output from, and timers. No capability needs a thread per child.
///
/// - A readable pidfd means the child exited: its status is read without reaping it
///   (`waitid(WNOWAIT)`), reported once to its observers, and the child is reaped with
///   `waitpid(pid)` (never -1) at once or when its owner releases it (``ChildLife``).
/// - Children are registered in ``OwnedChildren`` from before the spawn until reaped, so the
///   process API's orphan adoption never takes them.
/// - Descriptors given to ``watchReadable(_:_:)`` belong to the reactor until it closes them
///   (only its thread closes them, so a handler never reads a reused descriptor number).
/// - Handlers and exit observers run on the reactor's thread: they must not block.
/// - Memory: one small record per watched child, descriptor and timer; jobs queued between
///   two wake-ups.
public final class ChildReactor: Sendable {
    /// The agent's reactor, started on first use.
    public static let shared = ChildReactor(name: "agent-children")

    /// Children whose pidfd could not be had (kernels before 5.3) are checked this often.
    static let pollPeriod: Duration = .milliseconds(50)

    /// What a readable handler wants next.
    public enum ReadOutcome: Sendable {
        /// Keep watching.
        case keep
        /// Stop watching and close the descriptor (EOF, an error, or the owner is done).
        case close
    }

    private enum Watch {
        case exit(Child, pidfd: Int32)
        case readable(fd: Int32, handler: @Sendable (Int32) -> ReadOutcome, closed: @Sendable () -> Void)
    }

    private struct Timer {
        var at: ContinuousClock.Instant
        var body: @Sendable () -> Void
    }

    /// A machine ``drive(_:)`` steps: what its last step asked to wait for.
    private struct Drive {
        var step: @Sendable (Driven) -> Interest?
        var driven: Driven
        var read: Set<Int32> = []
        var write: Set<Int32> = []
        var timer: UInt64?
    }

    private struct State {
        var watches: [UInt64: Watch] = [:]
        var drives: [UInt64: Drive] = [:]
        /// Machines to step after this wake-up's events.
        var pendingSteps: Set<UInt64> = []
        /// Children without a pidfd, checked every ``pollPeriod``.
        var polled: [Child] = []
        var timers: [UInt64: Timer] = [:]
        var jobs: [@Sendable () -> Void] = []
        var nextToken: UInt64 = 1
        var started = false
    }

    private let name: String
    private let epfd: Int32
    private let wakefd: Int32
    private let state = Mutex(State())

    /// A reactor of its own (tests); the agent uses ``shared``. Crashes if the kernel gives no
    /// epoll set or eventfd (nothing could watch a child then).
    public init(name: String) {
        self.name = name
        epfd = agent_epoll_create()
        wakefd = agent_eventfd()
        precondition(epfd >= 0 && wakefd >= 0, "child reactor: epoll or eventfd: \(errno)")
        agent_epoll_add(epfd, wakefd, 0)
    }

    // MARK: Spawning

    /// Starts `spec` on the calling thread and watches it. Not for a ``ChildSpec/parentDeathSignal``
    /// (use ``spawnOnReactor(_:)``).
    public func spawn(_ spec: ChildSpec) throws(ChildSpawnError) -> Child {
        var pidfd: Int32 = -1
        let pid = try Self.start(spec, pidfd: &pidfd)
        let child = Child(pid: pid, reaping: spec.reaping, leadsGroup: spec.grouping != .callersGroup)
        watch(child, pidfd: pidfd)
        return child
    }

    /// Starts `spec` on the reactor's thread (so that its parent-death signal fires only when
    /// the agent dies) and watches it. The spawn is a vfork: the thread is held for the exec.
    public func spawnOnReactor(_ spec: ChildSpec) async throws(ChildSpawnError) -> Child {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Child, ChildSpawnError>, Never>) in
            run { [self] in
                do throws(ChildSpawnError) {
                    continuation.resume(returning: .success(try spawn(spec)))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    /// The spawn itself: registered in ``OwnedChildren`` before it runs, a pidfd when the
    /// kernel gives one.
    private static func start(_ spec: ChildSpec, pidfd: inout Int32) throws(ChildSpawnError) -> pid_t {
        var step: Int32 = 0
        var code: Int32 = 0
        var devNull: Int32 = -1
        if spec.output < 0 { devNull = open("/dev/null", O_WRONLY | O_CLOEXEC) }
        defer { if devNull >= 0 { close(devNull) } }
        var descriptor: Int32 = -1
        let pid = OwnedChildren.spawning { () -> pid_t in
            withCStrings(spec.arguments) { argv in
                withCStrings(spec.environment) { envp in
                    spec.executable.withCString { path in
                        (spec.directory ?? "").withCString { cwd in
                            var options = agent_spawn_options(
                                path: path, argv: argv, envp: envp, cwd: cwd, output_fd: spec.output >= 0 ? spec.output : devNull,
                                oom_score_adj: spec.oomScoreAdj ?? AGENT_SPAWN_KEEP, nice_value: spec.nice ?? AGENT_SPAWN_KEEP,
                                nofile_soft: -1, parent_death_signal: spec.parentDeathSignal, error_fd: spec.errors,
                                new_session: spec.grouping == .newSession ? 1 : spec.grouping == .newGroup ? 0 : 2, input_fd: spec.input,
                                controlling_terminal: spec.controllingTerminal ? 1 : 0)
                            return agent_spawn_pidfd(&options, &step, &code, &descriptor)
                        }
                    }
                }
            }
        }
        guard pid > 0 else {
            switch UInt32(step) {
            case AGENT_SPAWN_STEP_CHDIR.rawValue: throw ChildSpawnError(step: .directory, errno: code)
            case AGENT_SPAWN_STEP_EXEC.rawValue: throw ChildSpawnError(step: .exec, errno: code)
            default: throw ChildSpawnError(step: .start, errno: code)
            }
        }
        pidfd = descriptor >= 0 ? descriptor : agent_pidfd_open(pid)
        return pid
    }

    /// Watches `child`'s exit through `pidfd` (the reactor owns it from now on), or by polling
    /// when -1.
    private func watch(_ child: Child, pidfd: Int32) {
        let started = state.withLock { s -> Bool in
            if pidfd >= 0 {
                let token = s.nextToken
                s.nextToken += 1
                s.watches[token] = .exit(child, pidfd: pidfd)
                agent_epoll_add(epfd, pidfd, token)
            } else {
                s.polled.append(child)
            }
            defer { s.started = true }
            return s.started
        }
        if !started { startThread() } else if pidfd < 0 { _ = wake() }
    }

    // MARK: Descriptors, timers, jobs

    /// Watches `fd` (level-triggered readability, hang-up and errors included) and calls
    /// `handler` on the reactor's thread each time; the reactor owns `fd` from now on and closes
    /// it when `handler` says ``ReadOutcome/close`` or ``closeReadable(_:)`` is called, then
    /// calls `closed`. Returns a token for ``closeReadable(_:)``.
    @discardableResult
    public func watchReadable(
        _ fd: Int32, closed: @escaping @Sendable () -> Void = {}, _ handler: @escaping @Sendable (Int32) -> ReadOutcome
    ) -> UInt64 {
        let (token, started) = state.withLock { s -> (UInt64, Bool) in
            let token = s.nextToken
            s.nextToken += 1
            s.watches[token] = .readable(fd: fd, handler: handler, closed: closed)
            agent_epoll_add(epfd, fd, token)
            defer { s.started = true }
            return (token, s.started)
        }
        if !started { startThread() }
        return token
    }

    /// Stops watching the descriptor behind `token` and closes it (on the reactor's thread,
    /// after any handler call under way); nothing if it is already closed.
    public func closeReadable(_ token: UInt64) {
        run { [self] in closeWatch(token) }
    }

    /// Calls `body` on the reactor's thread at `at` (or at once if past). Returns a token for
    /// ``cancelTimer(_:)``.
    @discardableResult
    public func schedule(at: ContinuousClock.Instant, _ body: @escaping @Sendable () -> Void) -> UInt64 {
        let (token, started) = state.withLock { s -> (UInt64, Bool) in
            let token = s.nextToken
            s.nextToken += 1
            s.timers[token] = Timer(at: at, body: body)
            defer { s.started = true }
            return (token, s.started)
        }
        if !started { startThread() } else { _ = wake() }
        return token
    }

    /// Cancels a timer that has not fired.
    public func cancelTimer(_ token: UInt64) {
        _ = state.withLock { $0.timers.removeValue(forKey: token) }
    }

    /// Runs `body` on the reactor's thread, after the events of the current wake-up.
    public func run(_ body: @escaping @Sendable () -> Void) {
        let started = state.withLock { s -> Bool in
            s.jobs.append(body)
            defer { s.started = true }
            return s.started
        }
        if !started { startThread() } else { _ = wake() }
    }

    /// Children and descriptors watched now (tests, diagnostics).
    public var watchedCount: Int { state.withLock { $0.watches.count + $0.polled.count + $0.drives.count } }

    // MARK: Driven machines

    /// What a driven machine waits for next: readability of `read`, writability of `write`
    /// (one-shot, so a full pipe wakes it once it drains), and the time `until`. The two sets
    /// must not share a descriptor.
    public struct Interest: Sendable {
        public var read: [Int32]
        public var write: [Int32]
        public var until: ContinuousClock.Instant?

        public init(read: [Int32] = [], write: [Int32] = [], until: ContinuousClock.Instant? = nil) {
            self.read = read
            self.write = write
            self.until = until
        }
    }

    /// A machine's handle: wakes it from any thread, closes its descriptors on the reactor's.
    public final class Driven: Sendable {
        let token: UInt64
        let reactor: ChildReactor

        init(token: UInt64, reactor: ChildReactor) {
            self.token = token
            self.reactor = reactor
        }

        /// Steps the machine soon (from any thread): something it waits on outside its
        /// descriptors happened (a queued message, a close request, its child's exit).
        public func wake() {
            reactor.markPending(token)
        }

        /// Withdraws `fd` from the epoll set, then closes it. Call only from a step (on the
        /// reactor's thread): the number cannot be reused before it leaves the set.
        public func close(_ fd: Int32) {
            reactor.withdraw(fd, from: token)
            Glibc.close(fd)
        }
    }

    /// Steps `step` on the reactor's thread: once at once, then whenever one of the
    /// descriptors of its last ``Interest`` is ready, its time comes or ``Driven/wake()`` is
    /// called; until it returns nil. For a child whose handling is one loop over several
    /// descriptors (an MCP server's stdin, stdout and stderr), without a thread of its own. The
    /// descriptors stay the machine's; it closes them with ``Driven/close(_:)``.
    @discardableResult
    public func drive(_ step: @escaping @Sendable (Driven) -> Interest?) -> Driven {
        let (driven, started) = state.withLock { s -> (Driven, Bool) in
            let token = s.nextToken
            s.nextToken += 1
            let driven = Driven(token: token, reactor: self)
            s.drives[token] = Drive(step: step, driven: driven)
            s.pendingSteps.insert(token)
            defer { s.started = true }
            return (driven, s.started)
        }
        if !started { startThread() } else { _ = wake() }
        return driven
    }

    fileprivate func markPending(_ token: UInt64) {
        let started = state.withLock { s -> Bool in
            if s.drives[token] != nil { s.pendingSteps.insert(token) }
            defer { s.started = true }
            return s.started
        }
        if !started { startThread() } else { _ = wake() }
    }

    fileprivate func withdraw(_ fd: Int32, from token: UInt64) {
        state.withLock { s in
            guard var drive = s.drives[token] else { return }
            if drive.read.remove(fd) != nil || drive.write.remove(fd) != nil { agent_epoll_del(epfd, fd) }
            s.drives[token] = drive
        }
    }

    /// Steps the machines that are due, and applies what each asks to wait for next.
    private func runSteps() {
        let due = state.withLock { s -> [(UInt64, Drive)] in
            defer { s.pendingSteps = [] }
            return s.pendingSteps.compactMap { token in s.drives[token].map { (token, $0) } }
        }
        for (token, drive) in due {
            let interest = drive.step(drive.driven)
            let timer = state.withLock { s -> UInt64? in
                guard var current = s.drives[token] else { return nil }
                let oldTimer = current.timer
                current.timer = nil
                guard let interest else {
                    for fd in current.read.union(current.write) { agent_epoll_del(epfd, fd) }
                    s.drives[token] = nil
                    return oldTimer
                }
                let read = Set(interest.read)
                for fd in current.read.subtracting(read) { agent_epoll_del(epfd, fd) }
                for fd in read.subtracting(current.read) { agent_epoll_add(epfd, fd, token) }
                // One-shot: re-armed on every step that still has something to write.
                for fd in current.write { agent_epoll_del(epfd, fd) }
                for fd in interest.write { agent_epoll_add_writable(epfd, fd, token) }
                current.read = read
                current.write = Set(interest.write)
                s.drives[token] = current
                return oldTimer
            }
            if let timer { cancelTimer(timer) }
            if let until = interest?.until {
                let next = schedule(at: until) { [self] in markPending(token) }
                let stale = state.withLock { s -> Bool in
                    guard s.drives[token] != nil else { return true }
                    s.drives[token]?.timer = next
                    return false
                }
                if stale { cancelTimer(next) }
            }
        }
    }

    // MARK: The thread

    private func startThread() {
        AgentThread.start(name: name) { [self] in loop() }
    }

    private func wake() -> Bool {
        var one: UInt64 = 1
        return write(wakefd, &one, 8) == 8
    }

    private func loop() {
        var events = [UInt64](repeating: 0, count: 64)
        while true {
            let timeout = state.withLock { s -> Int64 in
                var next = s.timers.values.map(\.at).min()
                if !s.polled.isEmpty { next = min(next ?? .now + Self.pollPeriod, .now + Self.pollPeriod) }
                if !s.jobs.isEmpty || !s.pendingSteps.isEmpty { return 0 }
                guard let next else { return -1 }
                let wait = min(max(next - .now, .zero), .seconds(60))
                return wait.components.seconds * 1_000_000_000 + wait.components.attoseconds / 1_000_000_000
            }
            let n = events.withUnsafeMutableBufferPointer { agent_epoll_wait_ns(epfd, $0.baseAddress, 64, timeout) }
            if n < 0 && errno != EINTR { continue }
            for i in 0..<max(0, Int(n)) {
                let token = events[i]
                if token == 0 {
                    var counter: UInt64 = 0
                    _ = read(wakefd, &counter, 8)
                    continue
                }
                handle(token)
            }
            runJobs()
            fireTimers()
            checkPolled()
            runSteps()
        }
    }

    private func handle(_ token: UInt64) {
        let watch = state.withLock { s -> Watch? in
            if s.drives[token] != nil { s.pendingSteps.insert(token) }
            return s.watches[token]
        }
        guard let watch else { return }
        switch watch {
        case .exit(let child, let pidfd):
            guard child.checkExit() else { return }
            state.withLock { s in
                s.watches[token] = nil
                agent_epoll_del(epfd, pidfd)
            }
            close(pidfd)
        case .readable(let fd, let handler, _):
            if handler(fd) == .close { closeWatch(token) }
        }
    }

    /// On the reactor's thread only: no handler can be using the descriptor meanwhile.
    private func closeWatch(_ token: UInt64) {
        let removed = state.withLock { s -> Watch? in
            guard case .readable(let fd, _, _) = s.watches[token] else { return nil }
            agent_epoll_del(epfd, fd)
            return s.watches.removeValue(forKey: token)
        }
        guard case .readable(let fd, _, let closed) = removed else { return }
        close(fd)
        closed()
    }

    private func runJobs() {
        let jobs = state.withLock { s -> [@Sendable () -> Void] in
            defer { s.jobs = [] }
            return s.jobs
        }
        for job in jobs { job() }
    }

    private func fireTimers() {
        let now = ContinuousClock.now
        let due = state.withLock { s -> [Timer] in
            let due = s.timers.filter { $0.value.at <= now }
            for token in due.keys { s.timers[token] = nil }
            return due.values.sorted { $0.at < $1.at }
        }
        for timer in due { timer.body() }
    }

    private func checkPolled() {
        let polled = state.withLock { $0.polled }
        guard !polled.isEmpty else { return }
        let exited = polled.filter { $0.checkExit() }.map(ObjectIdentifier.init)
        guard !exited.isEmpty else { return }
        let gone = Set(exited)
        state.withLock { s in s.polled.removeAll { gone.contains(ObjectIdentifier($0)) } }
    }
}
