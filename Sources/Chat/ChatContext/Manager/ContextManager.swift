import AgentCore
import Logging
import ServiceLifecycle
import Synchronization

/// Keeps the chat context: the user sources, the latest snapshot and its version, and the
/// watcher that tells it when to resolve again.
///
/// It starts gated: the snapshot is version 0 and empty, and triggers are ignored until the
/// gate opens (with a control plane, when the first manifest's startup scripts end; without
/// one, at start). From then on every trigger (the gate, a manifest, a source added or
/// removed, a resync, a watcher burst, a change of the MCP engine's catalog) asks for a
/// resolve; triggers coalesce into one pending resolve, which runs on a thread of the
/// manager's own pool, never on an event loop. Each
/// resolve is a new version (from 1, bumped even when nothing changed) and is published to
/// the subscribers.
///
/// Memory: the latest snapshot (bounded by the resolver's caps), at most
/// ``maxSources`` sources, ``maxSubscribers`` subscribers buffering one snapshot each, and
/// ``maxResyncWaiters`` waiting resyncs.
public final class ContextManager: Service, Sendable {
    /// User sources kept at most; further adds are refused.
    public static let maxSources = 128
    /// Snapshot subscribers at most (one per upward session); further ones finish at once.
    public static let maxSubscribers = 64
    /// Resyncs waiting at most; further ones fail at once.
    public static let maxResyncWaiters = 256

    /// What opens the readiness gate.
    public enum Gate: Sendable {
        /// At start (no control plane, no startup scripts).
        case open
        /// When the first manifest's startup scripts end.
        case afterStartPhase(StartPhaseWatch)
    }

    /// A source operation's failure, with the text the routes answer.
    public enum SourceError: Error, Sendable, Equatable {
        case invalid(String)
        case notFound(String)
        case tooMany
    }

    /// Why a resync failed.
    public struct ClosedError: Error, Sendable, CustomStringConvertible {
        public var description: String { "agentcontext: manager closed" }
    }

    private struct State {
        var ready = false
        var closed = false
        var version: UInt64 = 0
        var snapshot = ContextSnapshot.empty
        var sources: [String] = []
        var seeded: Set<String> = []
        var workingDirectory: String
        var requested: UInt64 = 0
        var completed: UInt64 = 0
        var waiters: [UInt64: (after: UInt64, continuation: CheckedContinuation<ContextSnapshot, any Error>)] = [:]
        var nextID: UInt64 = 0
    }
    /// Snapshot subscribers; the latest is published only once version 1 exists.
    private let broadcast = LatestValueBroadcast<ContextSnapshot>(maxSubscribers: ContextManager.maxSubscribers)

    public let configuration: ChatContextOptions.Configuration
    public let home: String
    private let gate: Gate
    private let manifest: any ManifestSource
    private let mcpCatalog: MCPCatalog
    private let resolver: ContextResolver
    private let state: Mutex<State>
    private let pending = WorkSignal()
    private let pool = BlockingPool(name: "context", threads: 1, maxQueued: 4)
    let watcher: ContextWatcher
    let metrics = ContextMetrics()
    private let logger: Logger

    /// `directory` is the working directory until a manifest names one (`--directory`, else
    /// `home`).
    public init(
        configuration: ChatContextOptions.Configuration, home: String, directory: String?, manifest: any ManifestSource,
        gate: Gate, mcpCatalog: MCPCatalog = MCPCatalog(), resolver: ContextResolver = ContextResolver(),
        maxWatches: Int = ContextWatcher.defaultMaxWatches, logger: Logger = Logger(label: "workspace-agent.context")
    ) {
        self.mcpCatalog = mcpCatalog
        self.configuration = configuration
        self.home = home
        self.gate = gate
        self.manifest = manifest
        self.resolver = resolver
        self.logger = logger
        let workingDirectory = (directory?.isEmpty == false ? directory! : home)
        var initial = State(workingDirectory: workingDirectory)
        for seed in configuration.seeds(home: home, workingDirectory: workingDirectory) {
            if let path = try? ContextSourcePath.lexical(seed, home: home), !initial.sources.contains(path) {
                initial.sources.append(path)
                initial.seeded.insert(path)
            }
        }
        self.state = Mutex(initial)
        let relay = ChangeRelay()
        self.watcher = ContextWatcher.context(maxWatches: maxWatches) { relay.fire() }
        relay.set { [weak self] in self?.trigger() }
    }

    // MARK: Reading

    /// The latest snapshot (version 0 and empty until the gate opens).
    public var snapshot: ContextSnapshot { state.withLock { $0.snapshot } }
    public var isReady: Bool { state.withLock { $0.ready } }
    public var workingDirectory: String { state.withLock { $0.workingDirectory } }
    /// The user sources, in the order added.
    public var sources: [String] { state.withLock { $0.sources } }

    /// The current snapshot when there is one (version > 0), then each new one. Buffers only
    /// the newest unread one; cancelling the consumer unsubscribes.
    public func snapshots() -> AsyncStream<ContextSnapshot> { broadcast.subscribe() }

    // MARK: Sources

    /// The lexical form of `raw` (for lookups); the error text is the routes' detail.
    public func lexical(_ raw: String) throws(SourceError) -> String {
        do {
            return try ContextSourcePath.lexical(raw, home: home)
        } catch {
            throw .invalid("canonicalize: \(error.message)")
        }
    }

    /// Adds a source (nothing changes when it is already there) and asks for a resolve.
    @discardableResult
    public func addSource(_ raw: String) throws(SourceError) -> String {
        let path = try lexical(raw)
        let allowed = [home, home + "/.coder", home + "/.claude", workingDirectory]
        do {
            try ContextSourcePath.checkAddable(path, allowedRoots: allowed, fileSystem: resolver.fileSystem)
        } catch {
            throw .invalid(error.message)
        }
        let added = try state.withLock { s throws(SourceError) -> Bool in
            // Added by the user now, so a later manifest's re-seed keeps it.
            s.seeded.remove(path)
            guard !s.sources.contains(path) else { return false }
            guard s.sources.count < Self.maxSources else { throw .tooMany }
            s.sources.append(path)
            return true
        }
        if added { trigger() }
        return path
    }

    /// The registered source with `raw`'s lexical path.
    public func source(_ raw: String) throws(SourceError) -> String {
        let path = try lexical(raw)
        guard state.withLock({ $0.sources.contains(path) }) else { throw .notFound(path) }
        return path
    }

    /// Removes a source and asks for a resolve.
    public func removeSource(_ raw: String) throws(SourceError) {
        let path = try lexical(raw)
        let removed = state.withLock { s -> Bool in
            guard let index = s.sources.firstIndex(of: path) else { return false }
            s.sources.remove(at: index)
            s.seeded.remove(path)
            return true
        }
        guard removed else { throw .notFound(path) }
        trigger()
    }

    // MARK: Resolving

    /// Asks for a resolve (ignored until the gate opens); pending requests coalesce.
    public func trigger() {
        let go = state.withLock { s -> Bool in
            guard s.ready, !s.closed else { return false }
            s.requested += 1
            return true
        }
        if go { pending.notify() }
    }

    /// A resolve that starts after this call, and its snapshot. Before the gate opens, the
    /// version-0 empty snapshot. Throws ``ClosedError`` once the manager has stopped.
    public func resync() async throws -> ContextSnapshot {
        let id = state.withLock { s -> UInt64 in
            s.nextID += 1
            return s.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<ContextSnapshot, any Error>) in
                enum Now { case answer(ContextSnapshot), fail(any Error), wait }
                let now = state.withLock { s -> Now in
                    if s.closed { return .fail(ClosedError()) }
                    if !s.ready { return .answer(s.snapshot) }
                    if Task.isCancelled { return .fail(CancellationError()) }
                    if s.waiters.count >= Self.maxResyncWaiters { return .fail(ClosedError()) }
                    s.requested += 1
                    s.waiters[id] = (s.requested, continuation)
                    return .wait
                }
                switch now {
                case .answer(let snapshot): continuation.resume(returning: snapshot)
                case .fail(let error): continuation.resume(throwing: error)
                case .wait: pending.notify()
                }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.continuation.resume(throwing: CancellationError())
        }
    }

    public func run() async throws {
        watcher.start()
        defer { watcher.stop() }
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                group.addTask { await self.followManifests() }
                group.addTask {
                    for await _ in self.mcpCatalog.changes() { self.trigger() }
                }
                group.addTask {
                    if case .afterStartPhase(let watch) = self.gate { await watch.waitEnded() }
                    guard !Task.isCancelled else { return }
                    self.state.withLock { $0.ready = true }
                    self.trigger()
                }
                group.addTask { await self.resolveLoop() }
            }
        }
        let waiters = state.withLock { s in
            s.closed = true
            defer { s.waiters = [:] }
            return Array(s.waiters.values)
        }
        broadcast.finish()
        for waiter in waiters { waiter.continuation.resume(throwing: ClosedError()) }
    }

    /// Each manifest: its directory becomes the working directory, the lists seed again,
    /// and a resolve follows.
    private func followManifests() async {
        for await manifest in manifest.manifests() {
            state.withLock { s in
                if !manifest.directory.isEmpty { s.workingDirectory = manifest.directory }
                // Seeds of an earlier working directory go; sources added through the API stay.
                let seeds = configuration.seeds(home: home, workingDirectory: s.workingDirectory)
                    .compactMap { try? ContextSourcePath.lexical($0, home: home) }
                let current = Set(seeds)
                s.sources.removeAll { s.seeded.contains($0) && !current.contains($0) }
                s.seeded = s.seeded.intersection(current)
                for path in seeds where !s.sources.contains(path) && s.sources.count < Self.maxSources {
                    s.sources.append(path)
                    s.seeded.insert(path)
                }
            }
            trigger()
        }
    }

    private func resolveLoop() async {
        while !Task.isCancelled {
            await pending.wait()
            guard !Task.isCancelled else { return }
            let (request, workingDirectory, sources) = state.withLock { s in (s.requested, s.workingDirectory, s.sources) }
            let resolver = self.resolver
            let watcher = self.watcher
            let home = self.home
            let mcpServers = MCPServerResources.make(mcpCatalog.entries)
            let resolved: ContextSnapshot
            do {
                resolved = try await pool.run { _ in
                    let roots = ContextScanRoots.make(
                        workingDirectory: workingDirectory, home: home, userSources: sources, fileSystem: resolver.fileSystem)
                    let snapshot = resolver.resolve(roots: roots, mcpServers: mcpServers)
                    watcher.watch(ContextWatchSet.directories(for: roots, fileSystem: resolver.fileSystem, limit: watcher.maxWatches + 1))
                    return snapshot
                }
            } catch {
                continue
            }
            publish(resolved, request: request)
        }
    }

    private func publish(_ resolved: ContextSnapshot, request: UInt64) {
        let problem = watcher.problem
        let (snapshot, waiters) = state.withLock { s in
            s.version += 1
            var snapshot = resolved
            snapshot.version = s.version
            if snapshot.snapshotError.isEmpty, let problem { snapshot.snapshotError = problem }
            s.snapshot = snapshot
            s.completed = max(s.completed, request)
            let due = s.waiters.filter { $0.value.after <= request }
            for id in due.keys { s.waiters[id] = nil }
            // Under the lock: subscribers see the versions in order.
            broadcast.publish(snapshot)
            return (snapshot, due.values.map(\.continuation))
        }
        metrics.resolved(version: snapshot.version)
        logger.debug(
            "context resolved",
            metadata: [
                "version": "\(snapshot.version)", "resources": "\(snapshot.resources.count)",
            ])
        for waiter in waiters { waiter.resume(returning: snapshot) }
    }
}

/// Hands the watcher's bursts to the manager, which is built after the watcher.
private final class ChangeRelay: Sendable {
    private let target = Mutex<(@Sendable () -> Void)?>(nil)
    func set(_ body: @escaping @Sendable () -> Void) { target.withLock { $0 = body } }
    func fire() { target.withLock { $0 }?() }
}
