import CAgentSpawn
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The one thread that watches all of the agent's children: an epoll set over each child's
/// pidfd, the descriptors capabilities read their children's output from, and timers. No
/// capability needs a thread per child; the process API serves its own descriptors here as a
/// ``Client`` (its output fast path), the other capabilities use the watches below.
///
/// - A readable pidfd means the child exited: its status is read without reaping it
///   (`waitid(WNOWAIT)`), reported once to its observers, and the child is reaped with
///   `waitpid(pid)` (never -1) at once or when its owner releases it (``ChildLife``).
/// - Children are registered in ``OwnedChildren`` from before the spawn until reaped, so the
///   process API's orphan adoption never takes them.
/// - Descriptors given to ``watchReadable(_:_:)`` belong to the reactor until it closes them
///   (only its thread closes them, so a handler never reads a reused descriptor number).
/// - Handlers, clients and exit observers run on the reactor's thread: they must not block.
/// - One lock round per wake-up for the reactor's own bookkeeping (jobs, timers, clients
///   attached or ended), none per client event.
/// - Memory: one small record per watched child, descriptor, timer and client; jobs queued
///   between two wake-ups; one ``scratchSize`` buffer lent to clients, made with the first.
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
        /// Clients attached (or ended: nil) since the thread last looked; it applies them.
        var clientChanges: [(id: UInt64, client: (any Client)?)] = []
        var nextClient: UInt64 = 1
        var nextToken: UInt64 = 1
        var started = false

        mutating func takeClientChanges() -> [(id: UInt64, client: (any Client)?)] {
            defer { clientChanges = [] }
            return clientChanges
        }
    }

    /// What one wake-up takes from ``State`` in its one lock round.
    private struct Due {
        var jobs: [@Sendable () -> Void] = []
        var timers: [Timer] = []
        var polled: [Child] = []
        var steps = false
        var clientChanges: [(id: UInt64, client: (any Client)?)] = []
        /// The next timer or poll.
        var next: ContinuousClock.Instant?
    }

    private let name: String
    fileprivate let epfd: Int32
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

    /// Starts `spec` without watching it, for a client that watches its children itself (the
    /// process API): registered in ``OwnedChildren`` before it runs (the caller reaps it with
    /// ``OwnedChildren/reap(_:wait:)``), with its pidfd, or -1 when the kernel gives none.
    public static func startUnwatched(_ spec: ChildSpec) throws(ChildSpawnError) -> (pid: pid_t, pidfd: Int32) {
        var pidfd: Int32 = -1
        let pid = try start(spec, pidfd: &pidfd)
        return (pid, pidfd)
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
        let output = spec.output >= 0 ? spec.output : devNull
        func spawn(_ envp: UnsafePointer<UnsafeMutablePointer<CChar>?>) -> pid_t {
            withCStrings(spec.arguments) { argv in
                spec.executable.withCString { path in
                    (spec.directory ?? "").withCString { cwd in
                        var options = agent_spawn_options(
                            path: path, argv: argv, envp: envp, cwd: cwd, output_fd: output,
                            oom_score_adj: spec.oomScoreAdj ?? AGENT_SPAWN_KEEP, nice_value: spec.nice ?? AGENT_SPAWN_KEEP,
                            nofile_soft: Int64(spec.fileLimit ?? -1), parent_death_signal: spec.parentDeathSignal, error_fd: spec.errors,
                            new_session: spec.grouping == .newSession ? 1 : spec.grouping == .newGroup ? 0 : 2, input_fd: spec.input,
                            controlling_terminal: spec.controllingTerminal ? 1 : 0)
                        return agent_spawn_pidfd(&options, &step, &code, &descriptor)
                    }
                }
            }
        }
        let pid = OwnedChildren.spawning { () -> pid_t in
            if let block = spec.environmentBlock { return block.withPointers(spawn) }
            return withCStrings(spec.environment, spawn)
        }
        guard pid > 0 else {
            switch UInt32(step) {
            case AGENT_SPAWN_STEP_CHDIR.rawValue: throw ChildSpawnError(step: .directory, errno: code)
            case AGENT_SPAWN_STEP_EXEC.rawValue: throw ChildSpawnError(step: .exec, errno: code)
            case AGENT_SPAWN_STEP_FORK.rawValue: throw ChildSpawnError(step: .fork, errno: code)
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

    // MARK: Clients

    /// A component that serves descriptors of its own on the reactor's thread with logic of
    /// its own: the process API (256 KiB reads straight into its sinks, splices, parking of
    /// fast writers, its own exit and group bookkeeping). Its events cost no lock or
    /// allocation in the reactor: the client's word travels in the epoll event itself.
    ///
    /// Every call comes on the reactor's thread, one at a time, from the first wake-up after
    /// ``Registration/serve(_:)`` until ``detached()``; none may block.
    public protocol Client: AnyObject, Sendable {
        /// A descriptor added with `word` is ready: readable, hung up or in error. `scratch`
        /// (``scratchSize`` bytes) is the reactor's, lent for the call.
        func ready(_ word: UInt64, scratch: UnsafeMutableRawBufferPointer)
        /// Called once per wake-up, before the reactor waits again: does what is due at `now`
        /// and returns when it wants to be called next (nil: only after a wake-up).
        func tick(now: ContinuousClock.Instant, scratch: UnsafeMutableRawBufferPointer) -> ContinuousClock.Instant?
        /// The client was ended (``Registration/end()``): the last call it gets. It removes and
        /// closes its descriptors here.
        func detached()
    }

    /// The buffer lent to clients: one per reactor, so no client needs its own for reads.
    public static let scratchSize = 256 * 1024

    /// The largest word a client's descriptor may carry (40 bits; the epoll event's upper
    /// bits name the client).
    public static let maxClientWord: UInt64 = (1 << clientShift) - 1
    private static let clientShift: UInt64 = 40
    private static let clientFlag: UInt64 = 1 << 63
    private static let clientIDMask: UInt64 = (1 << 23) - 1

    /// A client's place on the reactor: adds, parks and removes its descriptors (from any
    /// thread; epoll calls only, no lock), wakes it, ends it.
    public final class Registration: Sendable {
        let id: UInt64
        let reactor: ChildReactor
        private var tag: UInt64 { ChildReactor.clientFlag | id << ChildReactor.clientShift }

        init(id: UInt64, reactor: ChildReactor) {
            self.id = id
            self.reactor = reactor
        }

        /// Starts calling `client` (once per registration). Descriptors added before are
        /// served from then on (their readiness waits in the epoll set).
        public func serve(_ client: any Client) {
            reactor.changeClient(id, client)
        }

        /// Watches `fd` (level-triggered readability, hang-up and errors included): the
        /// client's ``Client/ready(_:scratch:)`` gets `word` (at most ``maxClientWord``). The
        /// descriptor stays the client's: it removes it before closing it. False if epoll
        /// refused.
        @discardableResult
        public func add(_ fd: Int32, word: UInt64) -> Bool {
            precondition(word <= ChildReactor.maxClientWord, "client word too large")
            return agent_epoll_add(reactor.epfd, fd, tag | word) == 0
        }

        /// Waits once for `fd` to take bytes (one-shot writability, errors and hang-up
        /// included): a writer on a full pipe or terminal. The client gets `word` once, then
        /// removes `fd` (also when it gives up first). Add it only once ``serve(_:)`` was
        /// called: the event is reported once, and lost if no client is named yet. False if
        /// epoll refused.
        @discardableResult
        public func addWritable(_ fd: Int32, word: UInt64) -> Bool {
            precondition(word <= ChildReactor.maxClientWord, "client word too large")
            return agent_epoll_add_writable(reactor.epfd, fd, tag | word) == 0
        }

        /// Turns `fd`'s readability on or off (off, its hang-up and errors still wake): a
        /// client parks a fast writer's pipe so one later read takes what piled up. False if
        /// epoll refused.
        public func setReadable(_ fd: Int32, word: UInt64, _ readable: Bool) -> Bool {
            agent_epoll_set_readable(reactor.epfd, fd, tag | word, readable ? 1 : 0) == 0
        }

        /// Stops watching `fd` (before the client closes it).
        public func remove(_ fd: Int32) {
            agent_epoll_del(reactor.epfd, fd)
        }

        /// Makes the reactor wake and tick its clients soon (from any thread): something a
        /// client's next ``Client/tick(now:scratch:)`` depends on changed.
        public func wake() {
            _ = reactor.wake()
        }

        /// Ends the client: after the current wake-up's events it gets ``Client/detached()``
        /// and no call after that. Calls from then on do nothing.
        public func end() {
            reactor.changeClient(id, nil)
        }
    }

    /// A place for a client; it is called once ``Registration/serve(_:)`` names it. (Two
    /// steps, so that the client can keep its registration in a constant.)
    public func register() -> Registration {
        let id = state.withLock { s -> UInt64 in
            defer { s.nextClient += 1 }
            precondition(s.nextClient <= Self.clientIDMask, "child reactor: too many clients")
            return s.nextClient
        }
        return Registration(id: id, reactor: self)
    }

    fileprivate func changeClient(_ id: UInt64, _ client: (any Client)?) {
        let started = state.withLock { s -> Bool in
            s.clientChanges.append((id, client))
            defer { s.started = true }
            return s.started
        }
        if !started { startThread() } else { _ = wake() }
    }

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

    fileprivate func wake() -> Bool {
        var one: UInt64 = 1
        return write(wakefd, &one, 8) == 8
    }

    private func loop() {
        var events = [UInt64](repeating: 0, count: 64)
        /// The clients served (only this thread touches it: their events need no lock).
        var clients: [UInt64: any Client] = [:]
        /// Lent to clients; made with the first one (bounded: one per reactor).
        var scratch: UnsafeMutableRawBufferPointer?
        while true {
            let now = ContinuousClock.now
            let due = takeDue(now)
            apply(due.clientChanges, to: &clients)
            for job in due.jobs { job() }
            for timer in due.timers { timer.body() }
            if !due.polled.isEmpty { checkPolled(due.polled) }
            if due.steps { runSteps() }
            var next = due.next
            if !clients.isEmpty {
                let lent = scratch ?? UnsafeMutableRawBufferPointer.allocate(byteCount: Self.scratchSize, alignment: 16)
                scratch = lent
                for client in clients.values {
                    if let at = client.tick(now: now, scratch: lent) { next = min(next ?? at, at) }
                }
            }
            // Jobs, timers, steps and client changes that arrive from here on write the
            // eventfd, so the wait ends at once for them.
            var timeout: Int64 = -1
            if let next {
                let wait = min(max(next - .now, .zero), .seconds(60))
                timeout = wait.components.seconds * 1_000_000_000 + wait.components.attoseconds / 1_000_000_000
            }
            let n = events.withUnsafeMutableBufferPointer { agent_epoll_wait_ns(epfd, $0.baseAddress, 64, timeout) }
            for i in 0..<max(0, Int(n)) {
                let token = events[i]
                if token & Self.clientFlag != 0 {
                    let id = (token >> Self.clientShift) & Self.clientIDMask
                    // A client served after this wake-up began: its changes are applied now, as
                    // a one-shot event (a writer's writability) is reported only once.
                    if clients[id] == nil { apply(state.withLock { s in s.takeClientChanges() }, to: &clients) }
                    if let client = clients[id] {
                        let lent = scratch ?? UnsafeMutableRawBufferPointer.allocate(byteCount: Self.scratchSize, alignment: 16)
                        scratch = lent
                        client.ready(token & Self.maxClientWord, scratch: lent)
                    }
                    continue
                }
                if token == 0 {
                    var counter: UInt64 = 0
                    _ = read(wakefd, &counter, 8)
                    continue
                }
                handle(token)
            }
        }
    }

    /// Attaches and ends clients (on the reactor's thread).
    private func apply(_ changes: [(id: UInt64, client: (any Client)?)], to clients: inout [UInt64: any Client]) {
        for change in changes {
            if let client = change.client {
                clients[change.id] = client
            } else if let ended = clients.removeValue(forKey: change.id) {
                ended.detached()
            }
        }
    }

    /// The one lock round of a wake-up: the jobs, due timers, children to poll and client
    /// changes, whether machines wait to be stepped, and when the next timer or poll is.
    private func takeDue(_ now: ContinuousClock.Instant) -> Due {
        state.withLock { s in
            var due = Due()
            swap(&due.jobs, &s.jobs)
            swap(&due.clientChanges, &s.clientChanges)
            due.steps = !s.pendingSteps.isEmpty
            if !s.timers.isEmpty {
                var dueTokens: [UInt64] = []
                for (token, timer) in s.timers {
                    if timer.at <= now {
                        dueTokens.append(token)
                    } else {
                        due.next = min(due.next ?? timer.at, timer.at)
                    }
                }
                for token in dueTokens { due.timers.append(s.timers.removeValue(forKey: token)!) }
                due.timers.sort { $0.at < $1.at }
            }
            if !s.polled.isEmpty {
                due.polled = s.polled
                let poll = now + Self.pollPeriod
                due.next = min(due.next ?? poll, poll)
            }
            return due
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
            guard let report = child.checkExit() else { return }
            state.withLock { s in
                s.watches[token] = nil
                agent_epoll_del(epfd, pidfd)
            }
            close(pidfd)
            report.deliver()
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

    private func checkPolled(_ polled: [Child]) {
        let reports = polled.compactMap { $0.checkExit() }
        guard !reports.isEmpty else { return }
        let gone = Set(reports.map { ObjectIdentifier($0.child) })
        state.withLock { s in s.polled.removeAll { gone.contains(ObjectIdentifier($0)) } }
        for report in reports { report.deliver() }
    }
}
