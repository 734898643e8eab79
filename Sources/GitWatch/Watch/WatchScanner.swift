import AgentCore
import CoreMetrics
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Logging

/// One socket's scanning state: the watched roots, the snapshot last sent for each, and what
/// each was at that scan (inotify generation, fingerprint), so that an unchanged repository
/// costs nothing. Scans run on NIO's thread pool, one repository at a time.
///
/// Memory: one snapshot (≤ 3 MiB of diff) per watched root; roots come from the chat's paths.
actor WatchScanner {
    /// How an already-sent repository is checked.
    enum Check: Sendable {
        /// Trust inotify where it covers the whole tree: no event, no work.
        case events
        /// Compare the fingerprint (a client's refresh, and the periodic safety net).
        case fingerprint
    }

    private let watcher: TreeWatcher
    /// Signalled by the watcher when a watched repository changes.
    private let signal: WorkSignal
    private var roots: Set<String> = []
    private var subscriptions: [String: TreeWatcher.Subscription] = [:]
    private var sent: [String: RepositorySnapshot] = [:]
    private var generations: [String: UInt64] = [:]
    private var fingerprints: [String: String] = [:]
    /// The last failure logged per root, so a repository that stays broken logs once.
    private var failures: [String: String] = [:]
    private let logger = Logger(label: "workspace-agent.git")

    /// Shared with every other socket (one poll per repository, not per socket).
    private let cache: RepositoryCache
    /// How old a fingerprint another socket took may be for a poll to use it.
    private let sharedFreshness: Duration
    /// Where libgit2 runs (``GitPool``; tests fill a small one).
    private let pool: BlockingPool
    /// Paths whose repositories could not be looked up (the pool was full): the next scan
    /// looks them up again.
    private var unresolved: [String]?

    init(
        watcher: TreeWatcher, signal: WorkSignal, cache: RepositoryCache = RepositoryCache(), sharedFreshness: Duration = .seconds(2),
        pool: BlockingPool = GitPool.shared
    ) {
        self.watcher = watcher
        self.signal = signal
        self.cache = cache
        self.sharedFreshness = sharedFreshness
        self.pool = pool
    }

    deinit {
        for subscription in subscriptions.values { watcher.unsubscribe(subscription) }
    }

    /// Adds the roots the chat's paths lead to, each watched before it is first scanned. When
    /// the git pool is full the paths are kept, and the next scan looks them up.
    func resolve(_ paths: [String]) async {
        let found: Set<String>
        do {
            found = try await pool.run { _ in RepositoryFinder.roots(for: paths) }
        } catch {
            unresolved = paths
            return
        }
        for root in found.subtracting(roots).sorted() {
            roots.insert(root)
            let subscription = await watcher.subscribe(root: root, signal: signal)
            // A scan may have run meanwhile (the actor is reentrant) and found it removed.
            if roots.contains(root), subscriptions[root] == nil {
                subscriptions[root] = subscription
            } else {
                watcher.unsubscribe(subscription)
            }
        }
    }

    var isWatching: Bool { !roots.isEmpty }

    private enum Outcome: Sendable {
        case removed
        case unchanged
        /// Not read: the git pool was full (or the socket is closing).
        case skipped
        case snapshot(RepositorySnapshot, fingerprint: String?)
        case failed(GitError)
    }

    /// What one scan found: the entries that changed since last sent (a removed repository
    /// once, then it leaves the set), and whether any repository was actually read (a scan
    /// that only saw unchanged generations did no work and does not start the cooldown).
    struct Result: Sendable {
        var changed: [RepositoryEntry]
        var readRepositories: Bool
    }

    /// Checks every root; nil when nothing is watched. A repository the git pool had no room
    /// for is not marked as seen: the next scan (the next tick at the latest) reads it.
    func scan(_ check: Check) async -> Result? {
        if let paths = unresolved {
            unresolved = nil
            await resolve(paths)
        }
        guard !roots.isEmpty else { return nil }
        var changed: [RepositoryEntry] = []
        var read = false
        for root in roots.sorted() {
            let status = watcher.status(of: root)
            let known = sent[root] != nil
            if known, check == .events, status.live, generations[root] == status.generation {
                GitWatchMetrics.check("unchanged_event").increment()
                continue
            }
            read = true
            let useFingerprint = check == .fingerprint || !status.live
            // A client's refresh (or the periodic check) reads the tree now; a poll of a
            // repository inotify cannot cover takes what another socket just read.
            let freshness = check == .fingerprint ? Duration.zero : sharedFreshness
            let previous = known ? fingerprints[root] : nil
            let cache = self.cache
            let outcome: Outcome
            do {
                outcome = try await pool.run { _ -> Outcome in
                    if RepositoryFinder.isGone(root) { return .removed }
                    let fingerprint =
                        useFingerprint
                        ? try? cache.fingerprint(root: root, freshWithin: freshness) { () throws(GitError) in
                            try RepositoryFingerprint.compute(root: root)
                        } : nil
                    if let fingerprint, fingerprint == previous { return .unchanged }
                    let version = RepositoryCache.Version(generation: status.live ? status.generation : nil, fingerprint: fingerprint)
                    switch Swift.Result(catching: { () throws(GitError) in
                        try cache.snapshot(root: root, version: version) { () throws(GitError) in try GitSnapshotter.snapshot(root: root) }
                    }) {
                    case .success(let snapshot): return .snapshot(snapshot, fingerprint: fingerprint)
                    case .failure(let error): return RepositoryFinder.isGone(root) ? .removed : .failed(error)
                    }
                }
            } catch {
                outcome = .skipped
            }
            switch outcome {
            case .removed:
                GitWatchMetrics.check("removed").increment()
                roots.remove(root)
                sent[root] = nil
                generations[root] = nil
                fingerprints[root] = nil
                failures[root] = nil
                cache.forget(root)
                if let subscription = subscriptions.removeValue(forKey: root) { watcher.unsubscribe(subscription) }
                changed.append(RepositoryEntry(removed: root))
            case .unchanged:
                GitWatchMetrics.check("unchanged_fingerprint").increment()
                generations[root] = status.generation
            case .skipped:
                // Its generation stays as it was, so an event it missed is not taken as seen.
                GitWatchMetrics.check("skipped").increment()
            case .failed(let error):
                // A corrupt HEAD, a lock held by git: kept and tried again next scan.
                GitWatchMetrics.check("failed").increment()
                if failures[root] != error.description {
                    failures[root] = error.description
                    logger.warning("cannot read repository; it stays watched", metadata: ["repo_root": "\(root)", "error": "\(error)"])
                }
            case .snapshot(let snapshot, let fingerprint):
                failures[root] = nil
                generations[root] = status.generation
                fingerprints[root] = fingerprint
                if sent[root] != snapshot {
                    GitWatchMetrics.check("changed").increment()
                    sent[root] = snapshot
                    changed.append(RepositoryEntry(snapshot))
                } else {
                    GitWatchMetrics.check("same").increment()
                }
            }
        }
        return Result(changed: changed, readRepositories: read)
    }
}
