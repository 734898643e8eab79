import AgentCore
import CAgentSpawn
import FoundationEssentials
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Watches the process API's shells as a client of the agent's one ``ChildReactor`` (no
/// thread or epoll set of its own): each shell's output pipe and pidfd are served on the
/// reactor's thread by the logic below, the process API's fast path.
///
/// - Output is read in 256 KiB chunks (the reactor's lent buffer) straight into the sink (no
///   per-chunk allocation).
/// - A readable pidfd means the shell exited: the pipe is drained of what the shell wrote,
///   then its exit status is read **without reaping it** (`waitid(WNOWAIT)`). Exit is
///   reported even while an orphan (`cmd &`) still holds the pipe; its later output keeps
///   flowing into the sink until EOF.
/// - **Process groups are only signalled while the agent owns them.** Each shell leads its
///   own group, whose id is the shell's pid. An exited shell stays an unreaped zombie for as
///   long as its group may still have members, so the kernel cannot hand that id to another
///   process; it is reaped (and the group released, never signalled again) once a scan of
///   `/proc` finds no other member. Scans run shortly after an exit or a SIGCHLD, every 2 s
///   while a group is held, and every 50 ms during shutdown.
/// - With `adoptOrphans` (the daemon) the agent is a child subreaper: descendants orphaned
///   by their parent's exit are re-parented to it, reaped by it (no zombies pile up when the
///   container's init does not reap), and terminated with everything else at shutdown.
///   Every child of the process not registered in ``OwnedChildren`` (the shells here, and
///   every child the ``ChildReactor`` starts for the other capabilities) is treated as
///   adopted, so this mode is for a process whose children all come from those.
/// - Shells are reaped with `waitpid(pid)` (never `-1`).
/// - Memory: one small record per watched child, parked pipe or adopted process, and the
///   scan buffers while a scan runs (the read buffer is the reactor's, shared).
final class ProcessWatcher: ChildReactor.Client {
    /// Pending output below this is read, not spliced away (a splice per small write
    /// would cost more than the copy it saves).
    static let discardThreshold: Int32 = 64 * 1024
    /// Bytes beyond the tail's worth that make splicing into the spool worth its system
    /// calls (a splice replaces a read and a write of the same bytes).
    static let spliceToSpoolThreshold = 4096
    /// A read pass that took at least this much found a writer faster than the reactor's
    /// wake-ups: its pipe is parked (readiness off) for ``bulkPause`` so the next pass takes
    /// hundreds of KiB in one go, instead of waking for every write the child makes (a
    /// `head -c` writes 4 KiB at a time, as stdio flushes into a pipe: about 100 000
    /// wake-ups per GiB otherwise).
    static let bulkBytes = 4 * 1024
    /// How long a bulk writer's pipe is left to fill (the output pipe holds 1 MiB: a writer
    /// at 4 GB/s fills it in 250 µs). Output is at most this much (plus timer slack) later.
    static let bulkPause: Duration = .microseconds(100)
    /// Reads per readiness event, so one chatty child cannot starve the others.
    static let readsPerEvent = 4
    /// Reads when draining at exit: bounded, so an orphan writing forever cannot stall exit.
    static let readsAtExit = 64
    /// Delay between an exit or SIGCHLD and the scan that follows (coalesces bursts). A
    /// scan reads every /proc/PID/stat of the host (1–2 ms of CPU); at 20 ms, a chat
    /// starting a command every millisecond paid about 0.1x of each start's time for it on
    /// two cores (`agent-bench proc`). Holding an exited shell's zombie a little longer only
    /// delays its reaping (its exit is reported at once).
    static let scanDelay: Duration = .milliseconds(250)
    /// Scan period while a group is held or an orphan is adopted.
    static let scanPeriod: Duration = .seconds(2)
    /// Scan period while shutting down.
    static let terminatingScanPeriod: Duration = .milliseconds(50)

    private enum Leader {
        /// The shell runs: its group is ours.
        case running
        /// The shell exited and is kept as a zombie: its group may have members and is ours.
        case held
        /// The shell was reaped: its group id may be reused and is never signalled.
        case released
    }

    private struct Watch {
        var pid: pid_t
        var pidfd: Int32
        var pipefd: Int32
        var sink: any ProcessEventSink
        var leader: Leader = .running
    }

    private struct State {
        var watches: [UInt64: Watch] = [:]
        var nextToken: UInt64 = 1
        var stopped = false
        /// Orphans re-parented to us (pid → process group), unreaped.
        var adopted: [pid_t: pid_t] = [:]
        /// The signal shutdown sends; orphans adopted later get it too.
        var terminating: Int32?
        var nextScan: ContinuousClock.Instant?
    }

    /// Words of the descriptors on the reactor: 1 for SIGCHLD; a watch's pipe is
    /// `token << 1` and its pidfd `token << 1 | 1` (tokens start at 1).
    private static let sigchldWord: UInt64 = 1

    // The shells are registered in AgentSystem's `OwnedChildren` (with every other module's
    // children), so that no scan takes them for orphans.

    /// The reactor whose thread serves this watcher.
    let reactor: ChildReactor
    private let registration: ChildReactor.Registration
    private let sigchldfd: Int32
    /// /dev/null, where output nobody will keep is spliced (-1: always read).
    private let nullfd: Int32
    /// The pipe through which spooled output nobody reads live moves into its spool.
    private let staging: SpliceStaging?
    private let adoptOrphans: Bool
    private let state = Mutex(State())
    private let finished = OneShotSignal()
    /// Pipes of bulk writers whose readiness is off until their deadline (``bulkPause``).
    /// Safety: touched only in ``ready(_:scratch:)``, ``tick(now:scratch:)``,
    /// ``detached()`` and ``closePipe(_:)``, which all run on the reactor's one thread (the
    /// ``ChildReactor/Client`` contract; ``closeOutput(_:)`` hops there): a lock here would
    /// cost one per read pass of a fast writer.
    private nonisolated(unsafe) var parked: [UInt64: ContinuousClock.Instant] = [:]

    /// Attaches to `reactor` and, for `adoptOrphans`, takes the subreaper role at once (so
    /// that no orphan of a child started later escapes).
    init(reactor: ChildReactor = .shared, adoptOrphans: Bool = false) {
        self.reactor = reactor
        registration = reactor.register()
        var adopt = false
        var sigchld: Int32 = -1
        if adoptOrphans {
            if agent_set_child_subreaper() == 0, case let fd = agent_eventfd(), fd >= 0 {
                agent_notify_sigchld(fd)
                sigchld = fd
                adopt = true
            }
        }
        sigchldfd = sigchld
        self.adoptOrphans = adopt
        nullfd = open("/dev/null", O_WRONLY | O_CLOEXEC)
        staging = nullfd >= 0 ? SpliceStaging(nullfd: nullfd) : nil
        registration.serve(self)
        if sigchld >= 0 {
            registration.add(sigchld, word: Self.sigchldWord)
            // At least the reactor's thread takes SIGCHLD (others may block it), so
            // adoption scans run.
            reactor.run { agent_unblock_sigchld() }
        }
    }

    /// Starts watching a child; the watcher owns `pidfd` and `pipefd` from now on.
    /// Returns a token for ``closeOutput(_:)`` and ``signalGroup(_:_:)``, or nil (fds
    /// closed) after ``stop()``.
    func watch(pid: pid_t, pidfd: Int32, pipefd: Int32, sink: any ProcessEventSink) -> UInt64? {
        let token = state.withLock { s -> UInt64? in
            guard !s.stopped else { return nil }
            let token = s.nextToken
            s.nextToken += 1
            s.watches[token] = Watch(pid: pid, pidfd: pidfd, pipefd: pipefd, sink: sink)
            // Under the lock, so that the shutdown (``detached()``) either sees this watch
            // and closes its descriptors, or ran before and this start sees `stopped`.
            registration.add(pipefd, word: token << 1)
            registration.add(pidfd, word: token << 1 | 1)
            return token
        }
        guard let token else {
            close(pidfd)
            close(pipefd)
            return nil
        }
        return token
    }

    /// Stops reading a child's output (its orphans then get SIGPIPE); used when reaping.
    /// The pipe is closed on the reactor's thread, where no read of it can be under way.
    func closeOutput(_ token: UInt64) {
        reactor.run { [self] in closePipe(token) }
    }

    /// Sends `signal` to the process group of the shell behind `token`, only if the agent
    /// still owns that group. Returns 0 or an errno (ESRCH when the group is not ours or
    /// has no process left).
    func signalGroup(_ token: UInt64, _ signal: Int32) -> Int32 {
        state.withLock { s in
            guard let watch = s.watches[token], watch.leader != .released else { return ESRCH }
            return kill(-watch.pid, signal) == 0 ? 0 : errno
        }
    }

    /// Signals every group and adopted orphan the agent owns, and every orphan adopted from
    /// now on; returns how many were signalled.
    @discardableResult
    func signalAll(_ signal: Int32) -> Int {
        let signalled = state.withLock { s in
            s.terminating = signal
            s.nextScan = .now
            if adoptOrphans { Self.collectOrphans(&s) }
            var count = 0
            for watch in s.watches.values where watch.leader != .released {
                if kill(-watch.pid, signal) == 0 { count += 1 }
            }
            for (pid, group) in s.adopted where Self.signalOrphan(pid, group, signal, s) {
                count += 1
            }
            return count
        }
        registration.wake()
        return signalled
    }

    /// SIGKILL to everything owned, without waiting for the lock if the reactor holds it
    /// (the shutdown watchdog's last resort must not block). Then, lock or not, every
    /// child of the subreaper itself: a shell whose group the lock kept from us, and an
    /// orphan re-parented since the last scan (a `setsid` grandchild whose shell the
    /// graceful phase ended), which no record names yet. A subreaper's children all come
    /// from its own spawns, and an unreaped child's pid, and a group it leads, cannot
    /// belong to anyone else.
    func killAllIfPossible() {
        _ = state.withLockIfAvailable { s in
            for watch in s.watches.values where watch.leader != .released { kill(-watch.pid, SIGKILL) }
            for (pid, group) in s.adopted { _ = Self.signalOrphan(pid, group, SIGKILL, s) }
        }
        guard adoptOrphans else { return }
        for pid in ProcessTable.children() {
            kill(getpgid(pid) == pid ? -pid : pid, SIGKILL)
        }
    }

    /// Groups and adopted orphans the agent still owns.
    var ownedCount: Int {
        state.withLock { s in s.watches.values.filter { $0.leader != .released }.count + s.adopted.count }
    }

    /// Closes every descriptor and leaves the reactor; children still running are not reaped.
    func stop() async {
        registration.end()
        await finished.wait()
    }

    // MARK: On the reactor's thread

    func ready(_ word: UInt64, scratch: UnsafeMutableRawBufferPointer) {
        if word == Self.sigchldWord {
            var counter: UInt64 = 0
            _ = read(sigchldfd, &counter, 8)
            scheduleScan(after: Self.scanDelay)
            return
        }
        let token = word >> 1
        if word & 1 == 0 {
            let pass = readOutput(token, scratch, maxReads: Self.readsPerEvent)
            if pass.state == .closed {
                // The pipe closes as the shell exits, a moment before its pidfd reports it:
                // when the exit is already there, report it now rather than on the next
                // wake-up (one epoll round on every command's critical path). Still
                // running: the pidfd will tell.
                leaderExited(token, scratch)
            } else if pass.bytes >= Self.bulkBytes, parked[token] == nil, setReadable(token, false) {
                parked[token] = .now + Self.bulkPause
            }
        } else {
            leaderExited(token, scratch)
        }
    }

    func tick(now: ContinuousClock.Instant, scratch: UnsafeMutableRawBufferPointer) -> ContinuousClock.Instant? {
        if !parked.isEmpty { serveParked(now, scratch) }
        var next = state.withLock { $0.nextScan }
        if let at = next, at <= now {
            scan()
            next = state.withLock { $0.nextScan }
        }
        if let wake = parked.values.min() { next = min(next ?? wake, wake) }
        return next
    }

    func detached() {
        shutdownDescriptors()
        finished.fire()
    }

    /// What a read pass left of the pipe.
    enum PipeState { case open, closed }

    /// A read pass: what it left of the pipe and how many bytes it took.
    struct Pass {
        var state: PipeState
        var bytes = 0
    }

    /// Parked pipes whose pause is over get a read pass; a pipe that filled meanwhile stays
    /// parked for another pause, one that did not wakes on readiness again.
    private func serveParked(_ now: ContinuousClock.Instant, _ scratch: UnsafeMutableRawBufferPointer) {
        for (token, deadline) in parked where deadline <= now {
            let pass = readOutput(token, scratch, maxReads: Self.readsPerEvent)
            if pass.state == .closed {
                parked[token] = nil
            } else if pass.bytes >= Self.bulkBytes {
                parked[token] = now + Self.bulkPause
            } else {
                parked[token] = nil
                if !setReadable(token, true) { closePipe(token) }
            }
        }
    }

    /// Turns readiness of a watch's pipe on or off; false if the pipe is gone or epoll refused.
    private func setReadable(_ token: UInt64, _ readable: Bool) -> Bool {
        guard let pipefd = state.withLock({ $0.watches[token]?.pipefd }), pipefd >= 0 else { return false }
        return registration.setReadable(pipefd, word: token << 1, readable)
    }

    @discardableResult
    private func readOutput(_ token: UInt64, _ scratch: UnsafeMutableRawBufferPointer, maxReads: Int) -> Pass {
        guard let watch = state.withLock({ $0.watches[token] }), watch.pipefd >= 0 else { return Pass(state: .closed) }
        var taken = 0
        for round in 0..<maxReads {
            // At most this much is read now (a whole scratch buffer, unless a move came first).
            var limit = scratch.count
            // Bytes that no one will see (no subscriber, the head already full, and more
            // waiting than the tail keeps) are dropped by the kernel without a copy: the
            // per-byte cost of a chatty child falls to almost nothing.
            // (The pending count is asked for only once the sink says it could drop bytes.)
            if nullfd >= 0 {
                let pipefd = watch.pipefd
                let nullfd = self.nullfd
                let spool = watch.sink.spool
                let staging = self.staging
                var moved = 0
                var kept = 0
                watch.sink.discardUnretained { keep in
                    kept = keep
                    let pending = Int(agent_pipe_pending(pipefd))
                    // Spooled output keeps every byte: into the spool file, still without a copy
                    // through user space (which saves a copy for anything past the tail).
                    if let spool {
                        guard let staging, pending > keep + Self.spliceToSpoolThreshold else { return 0 }
                        moved = spool.appendSplicing(from: pipefd, count: pending - keep, through: staging)
                    } else {
                        guard pending > Int(Self.discardThreshold) else { return 0 }
                        moved = max(0, Int(agent_pipe_discard(pipefd, nullfd, pending - keep)))
                    }
                    return moved
                }
                // What the child wrote meanwhile is left for the next round to move too: a read
                // now would copy it (a fast writer refills the pipe during a move). The last
                // round reads the tail's worth left behind the move, and no more: a writer
                // that refills the pipe past the threshold before every round would otherwise
                // never be read, and the tail (and the total) a snapshot shows would stay
                // where they were when it began.
                if moved > 0 {
                    taken += moved
                    guard round == maxReads - 1, kept > 0 else { continue }
                    limit = min(kept, scratch.count)
                }
            }
            let n = read(watch.pipefd, scratch.baseAddress, limit)
            if n > 0 {
                taken += n
                watch.sink.output(UnsafeRawBufferPointer(rebasing: scratch[0..<n]))
                if n < limit { return Pass(state: .open, bytes: taken) }
            } else if n == 0 {
                closePipe(token)
                return Pass(state: .closed, bytes: taken)
            } else {
                switch errno {
                case EINTR: continue
                case EAGAIN: return Pass(state: .open, bytes: taken)
                default:
                    closePipe(token)
                    return Pass(state: .closed, bytes: taken)
                }
            }
        }
        return Pass(state: .open, bytes: taken)
    }

    private func closePipe(_ token: UInt64) {
        let taken = state.withLock { s -> Watch? in
            guard var watch = s.watches[token], watch.pipefd >= 0 else { return nil }
            let result = watch
            watch.pipefd = -1
            if watch.pidfd < 0 && watch.leader == .released {
                s.watches[token] = nil
            } else {
                s.watches[token] = watch
            }
            return result
        }
        parked[token] = nil
        guard let taken else { return }
        registration.remove(taken.pipefd)
        close(taken.pipefd)
        taken.sink.outputClosed()
    }

    /// The shell behind `token` exited: drain its output, read its status without reaping
    /// it, and hold its group until a scan finds it empty.
    private func leaderExited(_ token: UInt64, _ scratch: UnsafeMutableRawBufferPointer) {
        // Everything the shell wrote is in the pipe by now: take it before reporting exit,
        // so `running: false` means the shell's output is complete.
        readOutput(token, scratch, maxReads: Self.readsAtExit)
        let exited = state.withLock { s -> (sink: any ProcessEventSink, status: ExitStatus)? in
            guard var watch = s.watches[token], watch.pidfd >= 0 else { return nil }
            // Nil: spurious readiness; still running.
            guard let peeked = Self.peekExit(watch.pid) else { return nil }
            if peeked.reapedElsewhere {
                // Nothing of it is ours any more.
                watch.leader = .released
                OwnedChildren.forget(watch.pid)
            } else {
                watch.leader = .held
            }
            registration.remove(watch.pidfd)
            close(watch.pidfd)
            watch.pidfd = -1
            if watch.leader == .released && watch.pipefd < 0 {
                s.watches[token] = nil
            } else {
                s.watches[token] = watch
            }
            return (watch.sink, peeked.status)
        }
        guard let exited else { return }
        scheduleScan(after: Self.scanDelay)
        exited.sink.exited(exited.status)
    }

    /// A shell's exit, read without reaping it: nil while it runs. One whose status cannot be
    /// read (ECHILD: someone else reaped it) is `reapedElsewhere` and reports -1 without a
    /// signal, as the reference reports a wait error that is not an `ExitError`.
    static func peekExit(_ pid: pid_t) -> (status: ExitStatus, reapedElsewhere: Bool)? {
        var waitStatus: Int32 = 0
        let peeked = agent_peek_exit(pid, &waitStatus)
        if peeked == 0 { return nil }
        if peeked < 0 { return (ExitStatus(code: -1, signal: nil), true) }
        return (ExitStatus(waitStatus: waitStatus), false)
    }

    private func scheduleScan(after delay: Duration) {
        state.withLock { s in
            let at = ContinuousClock.now + delay
            s.nextScan = min(s.nextScan ?? at, at)
        }
    }

    /// Reaps adopted orphans that exited, then releases held groups that have no member
    /// left besides their zombie leader.
    private func scan() {
        let heldPids = state.withLock { s -> [pid_t] in
            s.nextScan = nil
            if adoptOrphans { Self.collectOrphans(&s) }
            return s.watches.values.filter { $0.leader == .held }.map(\.pid)
        }
        var members: [pid_t: Int] = [:]
        if !heldPids.isEmpty {
            let held = Set(heldPids)
            for (_, group) in ProcessTable.processGroups() where held.contains(group) {
                members[group, default: 0] += 1
            }
        }
        state.withLock { s in
            for (token, var watch) in s.watches where watch.leader == .held {
                // The zombie leader itself is one member of its group.
                guard members[watch.pid, default: 0] <= 1 else { continue }
                Self.reapShell(watch.pid)
                watch.leader = .released
                if watch.pipefd < 0 { s.watches[token] = nil } else { s.watches[token] = watch }
            }
            let busy = s.watches.values.contains { $0.leader == .held } || !s.adopted.isEmpty
            if busy {
                let at = ContinuousClock.now + (s.terminating != nil ? Self.terminatingScanPeriod : Self.scanPeriod)
                s.nextScan = min(s.nextScan ?? at, at)
            }
        }
    }

    /// Reaps adopted orphans that exited and records new ones (under the state lock, so a
    /// signal never races a reap). Signals new ones during shutdown.
    private static func collectOrphans(_ s: inout State) {
        // The shell set is locked while children are listed: a spawn registers its shell
        // under the same lock, so a new shell is never taken for an orphan.
        // A spawn under way has a child that is not registered yet: try again shortly.
        guard let children = OwnedChildren.unowned(of: ProcessTable.children) else {
            let at = ContinuousClock.now + scanDelay
            s.nextScan = min(s.nextScan ?? at, at)
            return
        }
        let current = Set(children)
        for pid in children {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                s.adopted[pid] = nil
                continue
            }
            if s.adopted[pid] == nil {
                let group = getpgid(pid)
                s.adopted[pid] = group
                if let signal = s.terminating { _ = signalOrphan(pid, group, signal, s) }
            }
        }
        for pid in s.adopted.keys where !current.contains(pid) { s.adopted[pid] = nil }
    }

    /// An adopted orphan is our unreaped child, so its pid (and a group it leads) cannot be
    /// reused while we hold the lock. A member of one of our held groups is reached through
    /// that group; one that leads its own group is signalled with its group; any other only
    /// by itself.
    private static func signalOrphan(_ pid: pid_t, _ group: pid_t, _ signal: Int32, _ s: State) -> Bool {
        if s.watches.values.contains(where: { $0.pid == group && $0.leader != .released }) { return false }
        return kill(group == pid ? -pid : pid, signal) == 0
    }

    private func shutdownDescriptors() {
        let watches = state.withLock { s -> [Watch] in
            s.stopped = true
            defer { s.watches.removeAll() }
            for watch in s.watches.values where watch.leader == .held { Self.reapShell(watch.pid) }
            return Array(s.watches.values)
        }
        for watch in watches { OwnedChildren.forget(watch.pid) }
        parked = [:]
        for watch in watches {
            if watch.pipefd >= 0 {
                registration.remove(watch.pipefd)
                close(watch.pipefd)
                watch.sink.outputClosed()
            }
            if watch.pidfd >= 0 {
                registration.remove(watch.pidfd)
                close(watch.pidfd)
            }
        }
        // The SIGCHLD eventfd stays open: the signal handler writes to it for the process's
        // life.
        if sigchldfd >= 0 { registration.remove(sigchldfd) }
        staging?.close()
        if nullfd >= 0 { close(nullfd) }
    }
}
