import AgentCore
import CoreMetrics
import FoundationEssentials
import Glibc
import Logging
import Synchronization

/// Watches repositories with inotify for every watch socket of the agent (one instance,
/// one thread), so that an edit by any process wakes the sockets watching that repository
/// at once, and a scan with no event since the last one can skip the repository at no cost.
/// A repository whose directories do not fit the watch budget, or any repository when
/// inotify is unavailable, is reported not `live`: its sockets then check it with
/// ``RepositoryFingerprint`` on each poll instead.
///
/// The thread starts with the first watched repository and ends with the last.
/// Memory: one entry per watched repository and one signal per subscribing socket here;
/// the engine's bound is `maxWatches` directories.
public final class TreeWatcher: Sendable {
    /// A repository's state as seen by scanners.
    struct Status: Equatable, Sendable {
        /// Moves on every relevant event, and when the repository stops or starts being live.
        /// Never handed out twice by one watcher, whatever the repository: a repository
        /// unwatched and watched again does not start over at a generation whose tree a
        /// scanner (or ``RepositoryCache``) recorded before. 0 for a repository not watched.
        var generation: UInt64
        /// Every directory is watched: the same generation means the same tree.
        var live: Bool
    }

    struct Subscription: Hashable, Sendable {
        let id: UInt64
        let root: String
    }

    private enum Command: Sendable {
        case add(String)
        case remove(String)
    }

    private struct RootState {
        var generation: UInt64
        var live = false
        var ready = false
        var subscribers: [UInt64: WorkSignal] = [:]
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private struct Shared {
        var roots: [String: RootState] = [:]
        var commands: [Command] = []
        var running = false
        /// The write end of the running engine's wake-up socket pair; -1 when none runs.
        var wake: Int32 = -1
        var nextID: UInt64 = 0
        /// The last generation handed out, to any repository.
        var clock: UInt64 = 0

        mutating func nextGeneration() -> UInt64 {
            clock += 1
            return clock
        }
    }

    private let shared = Mutex(Shared())
    let maxWatches: Int
    private let logger = Logger(label: "workspace-agent.git")
    /// Run by the watcher thread before each round of commands (tests hold the thread there,
    /// so that a new repository stays registered but not yet watched).
    private let beforeRound: (@Sendable () -> Void)?

    /// At most `maxWatches` directories are watched in all (kept under half the kernel's
    /// per-user limit, which other tools in the workspace share).
    public convenience init(maxWatches: Int = 8192) {
        self.init(maxWatches: maxWatches, beforeRound: nil)
    }

    init(maxWatches: Int, beforeRound: (@Sendable () -> Void)?) {
        let kernel =
            (try? String(contentsOfFile: "/proc/sys/fs/inotify/max_user_watches", encoding: .utf8))
            .flatMap { Int($0.trimmingWhitespace()) } ?? 8192
        self.maxWatches = max(0, min(maxWatches, kernel / 2))
        self.beforeRound = beforeRound
    }

    /// Watches `root` for `signal`'s owner (signalled on every change); returns once the
    /// watches are in place, so that a scan made after this sees each later change as an event.
    func subscribe(root: String, signal: WorkSignal) async -> Subscription {
        let (id, ready, start) = shared.withLock { s -> (UInt64, Bool, Bool) in
            s.nextID += 1
            if s.roots[root] == nil {
                let generation = s.nextGeneration()
                s.roots[root] = RootState(generation: generation)
                s.commands.append(.add(root))
            }
            s.roots[root]?.subscribers[s.nextID] = signal
            let start = !s.running
            s.running = true
            Self.wake(&s)
            return (s.nextID, s.roots[root]?.ready ?? false, start)
        }
        if start {
            AgentThread.start(name: "git-inotify") { [self] in runEngine() }
        }
        if !ready {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = shared.withLock { s -> Bool in
                    guard s.roots[root]?.ready == false else { return true }
                    s.roots[root]?.waiters.append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        }
        return Subscription(id: id, root: root)
    }

    /// Stops watching for this subscriber; the repository's watches go with its last one.
    func unsubscribe(_ subscription: Subscription) {
        shared.withLock { s in
            guard var state = s.roots[subscription.root] else { return }
            state.subscribers[subscription.id] = nil
            if state.subscribers.isEmpty {
                s.roots[subscription.root] = nil
                s.commands.append(.remove(subscription.root))
                Self.wake(&s)
            } else {
                s.roots[subscription.root] = state
            }
        }
    }

    /// Whether the watcher thread runs (it ends with the last repository).
    var isRunning: Bool { shared.withLock { $0.running } }

    func status(of root: String) -> Status {
        shared.withLock { s in s.roots[root].map { Status(generation: $0.generation, live: $0.live && $0.ready) } }
            ?? Status(generation: 0, live: false)
    }

    /// Under the lock, so the descriptor cannot be closed (and reused) before the write.
    private static func wake(_ s: inout Shared) {
        guard s.wake >= 0 else { return }
        var one: UInt8 = 1
        _ = Glibc.write(s.wake, &one, 1)
    }

    /// The watcher thread: applies commands, reads events, publishes what they touched,
    /// and sleeps in poll(2) until inotify or a command wakes it. Ends with the last root.
    private func runEngine() {
        let engine = TreeWatchEngine(maxWatches: maxWatches, logger: logger)
        var pipeFDs: [Int32] = [-1, -1]
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        if socketpair(AF_UNIX, type, 0, &pipeFDs) == 0 {
            shared.withLock { $0.wake = pipeFDs[1] }
        }
        while true {
            beforeRound?()
            let commands = shared.withLock { s -> [Command]? in
                if s.commands.isEmpty && s.roots.isEmpty {
                    s.running = false
                    s.wake = -1
                    // Under the lock: a thread started after this one records its own counts later.
                    GitWatchMetrics.watches.record(0)
                    GitWatchMetrics.polledRepositories.record(0)
                    return nil
                }
                defer { s.commands = [] }
                return s.commands
            }
            guard let commands else { break }
            var added: Set<String> = []
            for command in commands {
                switch command {
                case .add(let root):
                    engine.add(root: root)
                    added.insert(root)
                case .remove(let root):
                    engine.remove(root: root)
                    added.remove(root)
                }
            }
            // One write is several events (modify, close); a burst settles first (quiet for
            // 10 ms, at most 40 ms), so that it costs one scan and not two.
            var touched = engine.drain()
            for _ in 0..<4 where !touched.isEmpty {
                var pending = pollfd(fd: engine.descriptor, events: Int16(POLLIN), revents: 0)
                guard poll(&pending, 1, 10) > 0 else { break }
                touched.formUnion(engine.drain())
            }
            publish(added: added, touched: touched, engine: engine)
            GitWatchMetrics.watches.record(engine.watchCount)
            GitWatchMetrics.polledRepositories.record(engine.polledCount)
            // The last repository left: end (at the top, under the lock) instead of sleeping.
            if shared.withLock({ $0.commands.isEmpty && $0.roots.isEmpty }) { continue }
            var fds = [
                pollfd(fd: engine.descriptor, events: Int16(POLLIN), revents: 0),
                pollfd(fd: pipeFDs[0], events: Int16(POLLIN), revents: 0),
            ]
            // Without a wake-up socket pair (out of descriptors), commands are picked up every 100 ms.
            _ = poll(&fds, 2, pipeFDs[0] >= 0 ? -1 : 100)
            var scratch = [UInt8](repeating: 0, count: 64)
            while pipeFDs[0] >= 0, read(pipeFDs[0], &scratch, scratch.count) > 0 {}
        }
        if pipeFDs[0] >= 0 {
            close(pipeFDs[0])
            close(pipeFDs[1])
        }
    }

    /// Marks added repositories ready, bumps touched ones (and any whose liveness changed),
    /// and wakes their subscribers. A repository becoming ready gets a new generation too: a
    /// scanner may have read it while its watches were being built (its actor is reentrant
    /// while it subscribes), and an edit made before the watches were in place was never an
    /// event; the generation that scanner recorded must not pass for the watched tree.
    private func publish(added: Set<String>, touched: Set<String>, engine: TreeWatchEngine) {
        var liveness: [String: Bool] = [:]
        for root in engine.rootNames { liveness[root] = engine.isLive(root) }
        let (signals, waiters) = shared.withLock { s -> ([WorkSignal], [CheckedContinuation<Void, Never>]) in
            var signals: [WorkSignal] = []
            var waiters: [CheckedContinuation<Void, Never>] = []
            for (root, live) in liveness {
                guard var state = s.roots[root] else { continue }
                if added.contains(root) && !state.ready {
                    state.ready = true
                    state.live = live
                    state.generation = s.nextGeneration()
                    waiters += state.waiters
                    state.waiters = []
                } else if state.ready && (touched.contains(root) || state.live != live) {
                    state.live = live
                    state.generation = s.nextGeneration()
                    signals += state.subscribers.values
                }
                s.roots[root] = state
            }
            return (signals, waiters)
        }
        for waiter in waiters { waiter.resume() }
        for signal in signals { signal.notify() }
    }
}
