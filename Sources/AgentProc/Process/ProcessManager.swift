import AgentCore
import AgentHTTP
import CoreMetrics
import FoundationEssentials
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Owns every process started through the API: starting, listing, waiting, signalling,
/// reaping, and terminating their process groups at shutdown.
///
/// Output and exits are seen on the agent's one ``ChildReactor`` (``ProcessWatcher``, no
/// thread of its own). It is a `Service`: `run()` reaps exited processes on a timer until
/// graceful shutdown, then terminates every process group (SIGTERM, a grace period,
/// SIGKILL) and leaves the reactor.
public final class ProcessManager: Service, Sendable {
    public struct Configuration: Sendable {
        /// Layer 2 of the environment, and the default directory.
        public var environmentProvider: any AgentEnvironmentProvider
        /// Layer 1: the agent's own environment.
        public var baseEnvironment: [String: String]
        /// Layer 3: what the agent's running sessions add (the desktop's `DISPLAY`), over
        /// the provider's variables and under the request's.
        public var sessionEnvironment: SessionEnvironment?
        /// `$HOME` fallback for the default directory (injectable for tests).
        public var homeDirectory: @Sendable () -> String?
        public var priority: ProcessPriority
        /// RLIMIT_NOFILE soft limit restored in children (the agent raises its own).
        public var childNofileSoft: Int?
        /// Most processes running at once; further starts fail with 500.
        public var maxRunning: Int = 1024
        /// Most exited processes kept for `/output` and `/list`; the oldest go first.
        public var maxRetainedExited: Int = 256
        /// Exited processes older than this are reaped (strictly greater, as the reference).
        public var reapAfter: Duration = .seconds(300)
        /// How often the timer reaps (the reference reaps only on `/list`).
        public var reapInterval: Duration = .seconds(30)
        /// Time between SIGTERM and SIGKILL at shutdown.
        public var shutdownGrace: Duration = .seconds(5)
        /// Longest `wait=true` (5 minutes, as the reference).
        public var maxWait: Duration = .seconds(300)
        /// Entries returned by `/list`.
        public var listLimit: Int = 10
        /// Where the working directories of chats' processes are recorded when they exit
        /// (the git watcher finds a chat's repositories there).
        public var chatPaths: ChatPaths?
        /// Make the agent a child subreaper: orphaned descendants are re-parented to it,
        /// reaped, and terminated at shutdown. Only for a process whose children all come
        /// from process managers (the daemon): any other child would be taken for an orphan.
        public var adoptOrphans = false
        /// Awaits on a line or a port across all processes (further ones: 429).
        public var maxAwaits: Int = ProcessManager.defaultMaxAwaits
        /// Stream subscribers across all processes.
        public var maxSubscribers: Int = 256
        /// Output queued for all stream subscribers together.
        public var maxSubscriberBytes: Int = 64 << 20
        /// A stream subscriber that accepts no data for this long is disconnected.
        public var subscriberStallTimeout: Duration = .seconds(30)
        /// Where processes' records, output spools and tool-call claims are kept
        /// (`<dir>/processes`), so they survive an agent restart; nil: a private temporary
        /// directory, removed at shutdown (nothing survives).
        public var stateDirectory: String?
        /// Bounds of the output spools (per process and in total).
        public var spoolLimits = OutputSpoolStore.Limits()
        /// Spool every process's output to disk (cursor reads, awaits from any offset,
        /// output across restarts). Off: only the head and tail in memory, as the reference.
        public var spoolOutput = true
        /// How long a stdin write or close may take from its arrival (its wait behind earlier
        /// writes included) when the child does not read.
        public var stdinWriteTimeout: Duration = .seconds(10)
        /// Called on the thread that is about to spawn a child or write a start's records
        /// (tests check that it is never an event loop).
        var onStartWork: (@Sendable () -> Void)?

        public init(
            environmentProvider: any AgentEnvironmentProvider = StaticEnvironmentProvider(),
            baseEnvironment: [String: String] = ProcessInfo.processInfo.environment,
            homeDirectory: (@Sendable () -> String?)? = nil,
            priority: ProcessPriority = .unchanged,
            childNofileSoft: Int? = nil
        ) {
            self.environmentProvider = environmentProvider
            self.baseEnvironment = baseEnvironment
            let home = baseEnvironment["HOME"]
            self.homeDirectory = homeDirectory ?? { home }
            self.priority = priority
            self.childNofileSoft = childNofileSoft
        }
    }

    /// Why a start failed; the route answers each with 500 and a detail.
    public enum StartFailure: Error, Equatable {
        /// Shutdown has begun.
        case closed
        case tooManyProcesses(limit: Int)
        /// The shell could not be started (the OS error, spelled out).
        case spawn(String)
    }

    /// Why a signal was not sent.
    public enum SignalFailure: Error, Equatable {
        /// The process exited (409).
        case notRunning
        /// kill(2) failed otherwise (500).
        case failed(String)
    }

    /// A supported signal name (case-sensitive, as the reference).
    public enum SignalName: String, Sendable {
        case kill
        case terminate

        var number: Int32 { self == .kill ? SIGKILL : SIGTERM }
    }

    public let configuration: Configuration
    /// The bound on all stream subscribers together.
    public let subscriberBudget: SubscriberBudget
    let logger: Logger
    /// Watches the processes' output and exits, on the reactor given at init.
    let watcher: ProcessWatcher
    /// Every process's output on disk; nil when the spool directory could not be made (see
    /// ``spoolUnavailable``): the manager then runs as with spooling off.
    let spools: OutputSpoolStore?
    /// Why output is not spooled although spooling is on (the spool path is not a
    /// directory, or the disk refused it); shown by `GET /status`.
    public let spoolUnavailable: String?
    /// Tool calls' starts (at most once each).
    let toolCalls: ToolCallStarts
    /// Failed writes of the files that outlive the agent (counted, logged rate-limited).
    let failures: DurableFailures
    /// The directory the manager made for itself (no state directory given), removed at shutdown.
    let privateDirectory: String?
    /// Awaits on a line or a port now (bounded by ``Configuration/maxAwaits``).
    let activeAwaits = Atomic<Int>(0)
    /// Processes' records on disk (with spooling on).
    let processLog: ProcessLog
    /// Removes forgotten processes' spools off the lock.
    let remover: SpoolRemover
    let state = Mutex(State())
    /// Environments built for starts without variables of their own (``childEnvironment``).
    let environments = Mutex(EnvironmentBlocks())

    /// Where a start's blocking work runs (the clone and exec, whose child may wait in
    /// `chdir` on a hung mount; the records' writes; a tool call's `fdatasync`): never on
    /// the caller's thread, which may be a connection's event loop. Two threads, so one
    /// stuck spawn does not stop the others; at most ``maxQueuedStarts`` starts wait.
    static let startPool = BlockingPool(name: "proc-start", threads: 2, maxQueued: maxQueuedStarts)
    /// Starts waiting for a thread of ``startPool`` at once; beyond, a start fails (500).
    static let maxQueuedStarts = 1024

    /// Runs a start's blocking `work` where it may block: inline when the caller is already on
    /// a thread that may (``BlockingThread``: the HTTP handler pool, where `POST /start` runs),
    /// else on ``startPool``, waited for without holding the caller's thread. Inline saves the
    /// two thread hops (there and back) that were most of a start's overhead on a busy host.
    func offLoop<T: Sendable>(_ work: @escaping @Sendable () -> T) async throws(StartFailure) -> T {
        let observe = configuration.onStartWork
        if BlockingThread.isCurrent {
            observe?()
            return work()
        }
        do {
            return try await Self.startPool.run { _ in
                observe?()
                return work()
            }
        } catch let overloaded as BlockingPool.Overloaded {
            throw StartFailure.spawn("start process: \(overloaded.description)")
        } catch {
            // Cancelled while queued: nothing ran.
            throw StartFailure.spawn("start process: cancelled")
        }
    }

    struct State {
        var processes: [String: ManagedProcess] = [:]
        /// Ids of exited processes in exit order (oldest first), from `exitedHead` on; it
        /// makes trimming and reaping O(1) per process instead of a scan per start.
        var exitedOrder: [String] = []
        var exitedHead = 0
        var closed = false
        var shutdownStarted = false

        var exitedCount: Int { exitedOrder.count - exitedHead }
        var runningCount: Int { processes.count - exitedCount }
        /// The ids of starts between their admission and their end (registered as running, or
        /// failed). At most ``Configuration/maxRunning`` ids.
        private(set) var starting: Set<String> = []

        /// Admits the start `id` when the running processes and the starts under way leave
        /// room under `limit`: it counts from here, so concurrent starts cannot all pass.
        mutating func admit(_ id: String, limit: Int) throws(StartFailure) {
            if closed { throw StartFailure.closed }
            guard runningCount + starting.count < limit else { throw StartFailure.tooManyProcesses(limit: limit) }
            // Ids are drawn at random; a second start under one id would count once.
            guard !starting.contains(id), processes[id] == nil else { throw StartFailure.spawn("process id \(id) is taken") }
            starting.insert(id)
        }

        /// The admitted start's process runs: it counts as running, no longer as starting, in
        /// one step (counted as both, it would refuse a start the limit leaves room for).
        mutating func register(_ process: ManagedProcess) {
            processes[process.id] = process
            starting.remove(process.id)
        }

        /// The start `id` ended: a failure before ``register(_:)`` frees its place.
        mutating func startEnded(_ id: String) {
            starting.remove(id)
        }

        mutating func popOldestExited() -> String? {
            guard exitedHead < exitedOrder.count else { return nil }
            let id = exitedOrder[exitedHead]
            exitedHead += 1
            if exitedHead > 1024, exitedHead * 2 > exitedOrder.count {
                exitedOrder.removeFirst(exitedHead)
                exitedHead = 0
            }
            return id
        }
    }

    /// A manager whose processes are watched on `reactor` (the agent's shared one; tests may
    /// give one of their own).
    public init(configuration: Configuration, logger: Logger, reactor: ChildReactor = .shared) throws {
        self.configuration = configuration
        self.subscriberBudget = SubscriberBudget(
            maxSubscribers: configuration.maxSubscribers, maxBytes: configuration.maxSubscriberBytes)
        self.logger = logger
        self.watcher = ProcessWatcher(reactor: reactor, adoptOrphans: configuration.adoptOrphans)
        let base: String
        if let directory = configuration.stateDirectory {
            base = directory + "/processes"
            privateDirectory = nil
        } else {
            base = try makePrivateDirectory(prefix: "agent-proc-")
            privateDirectory = base
        }
        try Self.makeDirectory(base)
        let failures = DurableFailures(logger: logger)
        self.failures = failures
        do {
            spools = try OutputSpoolStore(directory: base + "/spool", limits: configuration.spoolLimits) { failures.report(.spool, $0) }
            spoolUnavailable = nil
        } catch {
            // The API is the product; durable output is a feature of it: run on without it.
            spools = nil
            spoolUnavailable = "\(error)"
            logger.warning(
                "process output is not spooled: the spool directory is unusable",
                metadata: [
                    "error": "\(error)", "path": "\(base)/spool",
                ])
        }
        toolCalls = ToolCallStarts(directory: base, failures: failures)
        processLog = ProcessLog(directory: base, failures: failures, keeping: configuration.maxRetainedExited)
        remover = SpoolRemover(spools: spools)
        restore()
    }

    /// Output is spooled (and processes recorded): spooling is on and the spool directory usable.
    public var spooling: Bool { configuration.spoolOutput && spools != nil }

    private static func makeDirectory(_ path: String) throws {
        if mkdir(path, 0o700) != 0 && errno != EEXIST { throw SystemCallError(call: "mkdir \(path)", errno: errno) }
    }
}
