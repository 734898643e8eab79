import AgentCore
import Glibc
import Logging
import ServiceLifecycle
import Synchronization

/// Owns every MCP server connection of the workspace: loads the configured `.mcp.json` files
/// once the gate opens (after the first manifest's startup scripts; at start without a
/// control plane), reloads them when its watcher sees them change, keeps one session per
/// server, tries failed servers again with back-off, publishes the catalog (servers and their
/// tools) to AgentCore's ``MCPCatalog`` and proxies tool calls.
///
/// Reloads are differential: a server whose entry is unchanged keeps its session; new and
/// changed servers connect each on its own task (a reload never waits for a handshake, so a
/// server that never answers delays nobody); a changed server whose new session fails keeps
/// its old one (with a warning); removed servers are closed (a connect in flight is
/// cancelled). Reloads run one at a time on one task, and a reload whose files' fingerprints
/// (size, times, inode) are unchanged does nothing. A file that does not parse keeps its
/// last good servers (``MCPConfigSet``); when inotify fails, the files are polled.
///
/// Memory: one record per declared server (at most ``maxServers``), each with its session's
/// bounds (``MCPLimits``, the buffers of all of them within one ``MCPMemoryBudget``) and its listed
/// tools (within ``MCPToolBudget``'s bounds); at most
/// ``Configuration/maxCallsInFlight`` calls in all; per server at most one connect, one
/// listing (and one pending), its session's monitor and one pending retry.
public final class MCPServerManager: Service, Sendable {
    /// Servers declared across all files at most; entries past it are left out.
    public static let maxServers = 256

    public struct Configuration: Sendable {
        /// The `.mcp.json` files as configured (comma list entries: `~` expanded, relative
        /// ones joined to the working directory).
        public var configFiles: [String]
        /// The version given in `initialize` (the agent's).
        public var clientVersion: String
        public var timeouts: MCPClientSession.Timeouts
        public var restart: MCPRestartPolicy
        public var timing: MCPStdioProcess.Timing
        /// Calls in flight across every server; more are refused at once.
        public var maxCallsInFlight: Int
        /// How long a file that gave servers may be missing (an atomic save) before its
        /// servers are removed, counted from the load that found it missing.
        public var missingGrace: Duration = .seconds(1)
        /// How often the files are stat'ed while inotify cannot watch them.
        public var pollInterval: Duration = .seconds(2)
        /// Bytes every server's buffers may hold together (``MCPMemoryBudget``).
        public var memoryBudget = MCPLimits.memoryBudgetBytes
        /// A test seam: the watcher's kernel failure (see ``DirectoryWatcher/Fault``).
        var watcherFault: DirectoryWatcher.Fault?

        public init(
            configFiles: [String] = [".mcp.json"], clientVersion: String, timeouts: MCPClientSession.Timeouts = .init(),
            restart: MCPRestartPolicy = .init(), timing: MCPStdioProcess.Timing = .init(), maxCallsInFlight: Int = 64
        ) {
            self.configFiles = configFiles
            self.clientVersion = clientVersion
            self.timeouts = timeouts
            self.restart = restart
            self.timing = timing
            self.maxCallsInFlight = maxCallsInFlight
        }
    }

    /// What opens the gate.
    public enum Gate: Sendable {
        case open
        case afterStartPhase(StartPhaseWatch)
    }

    struct Server {
        /// The entry as the files say now.
        var desired: MCPServerConfig
        /// The entry the session was made from.
        var running: MCPServerConfig?
        var session: MCPClientSession?
        /// Changes whenever the session does, so that a monitor or retry of an earlier one
        /// knows it is stale.
        var generation: UInt64
        var state: MCPServerState
        /// Listed tools (reduced schemas, sorted); nil until a listing succeeded.
        var tools: [ContextTool]?
        var error = ""
        var restarts = 0
        /// Failures since the last session that stayed up.
        var failures = 0
        /// The pending retry's id; a retry that wakes with another id is stale.
        var retry: UInt64?
        /// The connect in flight (its id and task); an outcome with another id is stale.
        var attempt: UInt64?
        var connectTask: Task<Result<MCPClientSession, MCPError>, Never>?
        /// The generation a listing is in flight for, and whether another was asked
        /// meanwhile (one listing in flight, one pending).
        var listing: UInt64?
        var listAgain = false
        /// When the last listing started (list_changed waits ``listInterval`` after it), and
        /// what the caps cut from the last good one (``MCPToolBudget``).
        var listStarted: ContinuousClock.Instant?
        var cuts = MCPToolCuts()
    }

    struct State {
        var ready = false
        var closed = false
        var servers: [String: Server] = [:]
        var fingerprints: [String: MCPConfigSet.Fingerprint?]?
        var files: [String] = []
        var nextGeneration: UInt64 = 0
        var callsInFlight = 0
        var redactor = ContextRedactor()
        var watchedNames: Set<String> = []
        /// The files' last good parses (see ``MCPConfigSet``), their rows, and when a
        /// missing file's grace ends.
        var fileMemory: [String: MCPConfigSet.FileMemory] = [:]
        var fileProblems: [MCPConfigSet.FileProblem] = []
        var recheck: ContinuousClock.Instant?
        /// Why inotify does not watch the files (they are polled meanwhile); nil when it does.
        var watchProblem: String?

        mutating func generation() -> UInt64 {
            nextGeneration += 1
            return nextGeneration
        }
    }

    public let configuration: Configuration
    let home: String
    let fallbackDirectory: String?
    let environment: [String: String]
    let agentToken: String?
    let manifest: any ManifestSource
    let sessionEnvironment: SessionEnvironment
    let gate: Gate
    let catalog: MCPCatalog
    let logger: Logger
    let metrics = MCPMetrics()
    let random: @Sendable () -> Double
    let state = Mutex(State())
    let reloadSignal = WorkSignal()
    /// Wakes the poller when the watcher fails.
    let pollSignal = WorkSignal()
    let jobs: AsyncStream<@Sendable () async -> Void>
    let jobQueue: AsyncStream<@Sendable () async -> Void>.Continuation
    let watcher: DirectoryWatcher
    /// Every stdio server this engine started that is not reaped yet.
    let children = MCPStdioOwner()
    /// What every server's buffers hold, against ``Configuration/memoryBudget``.
    let budget: MCPMemoryBudget

    /// `directory` is the working directory until a manifest names one (`--directory`, else
    /// `home`); `environment` is the agent's own (expanding `env` values, and under each stdio
    /// server's environment); `agentToken` is redacted from every error shown.
    public init(
        configuration: Configuration, home: String, directory: String?, environment: [String: String], agentToken: String? = nil,
        manifest: any ManifestSource, sessionEnvironment: SessionEnvironment = SessionEnvironment(), gate: Gate,
        catalog: MCPCatalog, logger: Logger = Logger(label: "workspace-agent.mcp"),
        random: @escaping @Sendable () -> Double = { Double.random(in: 0...1) }
    ) {
        self.configuration = configuration
        self.home = home
        self.fallbackDirectory = directory
        self.environment = environment
        self.agentToken = agentToken
        self.manifest = manifest
        self.sessionEnvironment = sessionEnvironment
        self.gate = gate
        self.catalog = catalog
        self.logger = logger
        self.random = random
        budget = MCPMemoryBudget(limit: configuration.memoryBudget, observe: { MCPFlowMetrics.inUse($0) })
        // Unbounded in type, bounded in use: two jobs per declared server at most.
        (jobs, jobQueue) = AsyncStream.makeStream(of: (@Sendable () async -> Void).self)
        let relay = WatchRelay()
        watcher = DirectoryWatcher(name: "mcp watcher", fault: configuration.watcherFault, isRelevant: { relay.isRelevant($0, $1) }, onChange: { relay.fire() })
        relay.set(
            isRelevant: { [weak self] mask, name in
                mask & DirectoryWatcher.structural != 0 || (self?.state.withLock { $0.watchedNames.contains(name) } ?? false)
            },
            fire: { [weak self] in self?.reloadSignal.notify() })
    }

    // MARK: Reading

    /// Every declared server, sorted by name, then a row for each configured file in trouble
    /// (transport `config`, in list order): one that does not parse or is missing for a
    /// moment, or every file while inotify cannot watch them.
    public var servers: [MCPServerStatus] {
        let interval = configuration.pollInterval
        return state.withLock { s in
            let servers = s.servers.values.sorted { bytewisePrecedes($0.desired.name, $1.desired.name) }.map { server in
                MCPServerStatus(
                    name: server.desired.name, transport: Self.transportName(server.desired), state: server.state,
                    lastError: server.error, toolCount: server.tools?.count ?? 0, restarts: server.restarts,
                    pid: server.session.flatMap { $0.pid > 0 ? $0.pid : nil },
                    protocolVersion: server.session.map(\.protocolVersion), callsInFlight: server.session?.callsInFlight ?? 0,
                    descriptionsCut: server.shownCuts.descriptionsCut, toolsLeftOut: server.shownCuts.toolsLeftOut)
            }
            let polled = s.watchProblem.map { "not watched (\($0)): polled every \(interval)" }
            let files = s.files.compactMap { file -> MCPServerStatus? in
                let problem = s.fileProblems.first { $0.path == file }
                guard problem != nil || polled != nil else { return nil }
                let text = [problem?.message, polled].compactMap { $0 }.joined(separator: "; ")
                return MCPServerStatus(
                    name: file, transport: "config", state: problem?.state ?? .polling, lastError: text, toolCount: 0, restarts: 0,
                    pid: nil, protocolVersion: nil, callsInFlight: 0)
            }
            return servers + files
        }
    }

    /// Whether the first load has happened (the gate opened).
    public var isReady: Bool { state.withLock { $0.ready } }

    static func transportName(_ config: MCPServerConfig) -> String {
        config.transport.isEmpty ? "http" : config.transport
    }

    // MARK: Running

    public func run() async throws {
        watcher.start()
        defer { watcher.stop() }
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                group.addTask {
                    if case .afterStartPhase(let watch) = self.gate { await watch.waitEnded() }
                    guard !Task.isCancelled else { return }
                    self.state.withLock { $0.ready = true }
                    self.reloadSignal.notify()
                }
                group.addTask {
                    for await _ in self.manifest.manifests() { self.reloadSignal.notify() }
                }
                group.addTask { await self.reloadLoop() }
                group.addTask { await self.pollLoop() }
                await withTaskCancellationHandler {
                    for await job in self.jobs { group.addTask { await job() } }
                } onCancel: {
                    self.jobQueue.finish()
                }
                group.cancelAll()
            }
        }
        await closeAll()
    }

    /// Kills at once every stdio server still alive, connected or not yet (the watchdog's
    /// last resort when shutdown overran its bound).
    public func terminateNow() {
        children.killAll()
    }

    private func reloadLoop() async {
        while !Task.isCancelled {
            await reloadSignal.wait()
            guard !Task.isCancelled else { return }
            guard state.withLock({ $0.ready }) else { continue }
            await reload()
        }
    }

    /// While the watcher cannot watch the files, asks for a reload every ``Configuration/pollInterval``
    /// (a reload whose files' fingerprints are unchanged is a `stat` each); idle otherwise.
    private func pollLoop() async {
        while !Task.isCancelled {
            guard state.withLock({ $0.watchProblem != nil }) else {
                await pollSignal.wait()
                continue
            }
            guard (try? await Task.sleep(for: configuration.pollInterval)) != nil else { return }
            reloadSignal.notify()
        }
    }

    /// Closes every session and forgets the servers: every stdio server this engine started
    /// (also one still connecting) gets the shutdown with the hurried graces
    /// (``MCPStdioProcess/Timing/hurried``), HTTP sessions are closed, all in parallel.
    private func closeAll() async {
        let sessions = state.withLock { s -> [MCPClientSession] in
            s.closed = true
            defer { s.servers = [:] }
            for server in s.servers.values { server.connectTask?.cancel() }
            return s.servers.values.compactMap(\.session)
        }
        let children = self.children
        await Task {
            async let stdio: Void = children.closeAll()
            await Self.close(sessions)
            await stdio
        }.value
        catalog.publish([])
        metrics.servers([])
    }

    static func close(_ sessions: [MCPClientSession]) async {
        await withDiscardingTaskGroup { group in
            for session in sessions { group.addTask { await session.close() } }
        }
    }

    /// Runs `job` in the service's task group (dropped once the service stopped).
    func spawn(_ job: @escaping @Sendable () async -> Void) {
        jobQueue.yield(job)
    }

    /// The working directory: the manifest's when it names an existing directory, else
    /// `--directory`, else the home directory.
    var workingDirectory: String {
        if let directory = manifest.currentManifest?.directory, !directory.isEmpty,
            FileInfo.following(path: directory)?.kind == .directory
        {
            return directory
        }
        if let fallbackDirectory, !fallbackDirectory.isEmpty { return fallbackDirectory }
        return home
    }

    /// The environment a stdio server starts from: the agent's, the manifest's variables and
    /// the running sessions' (the desktop's `DISPLAY`); its entry's `env` goes over it.
    var serverEnvironment: [String: String] {
        var env = environment
        for (key, value) in manifest.currentManifest?.environment ?? [:] { env[key] = value }
        for (key, value) in sessionEnvironment.current.variables { env[key] = value }
        return env
    }
}

/// Hands the watcher's questions and bursts to the manager, which is built after it.
private final class WatchRelay: Sendable {
    private let target = Mutex<(relevant: DirectoryWatcher.Relevance, fire: @Sendable () -> Void)?>(nil)

    func set(isRelevant: @escaping DirectoryWatcher.Relevance, fire: @escaping @Sendable () -> Void) {
        target.withLock { $0 = (isRelevant, fire) }
    }

    func isRelevant(_ mask: UInt32, _ name: String) -> Bool { target.withLock { $0 }?.relevant(mask, name) ?? false }
    func fire() { target.withLock { $0 }?.fire() }
}
