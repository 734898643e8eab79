/// What the executable hands every module it builds: the state modules share, behind the
/// seams AgentCore defines, so that no module reaches into another.
public struct AgentContext: Sendable {
    /// The chat -> touched paths store (one per agent).
    public var chatPaths: ChatPaths
    /// The control plane's latest manifest, as modules need it.
    public var manifest: any ManifestSource
    /// Where modules send what goes up to the control plane.
    public var upward: any UpwardSink
    /// The agent's own environment (layer 1 of a child's environment).
    public var environment: [String: String]
    /// Directory for state that survives restarts (mode 0700, created at start).
    public var stateDirectory: String
    /// What running sessions (the desktop's `DISPLAY`) add to started processes' environment.
    public var sessionEnvironment: SessionEnvironment
    /// Where a module hands connections it received elsewhere (the tailnet's tunnel port) to
    /// be served by the HTTP API (the host's; ``NoConnectionAcceptor`` where there is none).
    public var connections: any ConnectionAcceptor
    /// Where the start and stop outcomes go (the control-plane session's lifecycle).
    public var lifecycle: any LifecycleReporter
    /// The tunnel's traffic, counted by the tailnet and read by the stats report.
    public var tunnelTraffic: TunnelTraffic
    /// The agent's own counters and gauges, as the stats report sends them upward.
    public var metrics: any MetricsSnapshotSource
    /// Run before the agent's metrics are read: modules whose figures live elsewhere
    /// register here to bring their metrics up to date.
    public var metricsRefresh: MetricsRefresh
    /// When the first manifest's startup scripts end; nil without a control plane (there are
    /// none to wait for).
    public var startPhase: StartPhaseWatch?
    /// The MCP engine's servers and tools, which the chat context publishes.
    public var mcpCatalog: MCPCatalog
    /// Running SSH and terminal sessions by kind, for the stats report.
    public var sessionCounts: SessionCounts
    /// The control plane's announcement banners (the upward session stores, SSH login shells show).
    public var announcementBanners: AnnouncementBanners
    /// What every command a module starts gets beyond its base (``CommandEnvironment``).
    public var commandEnvironment: CommandEnvironment
    /// coderd's REST API as this agent (nil standalone): the agent socket answers the
    /// in-workspace commands' few requests through it when commands do not get the token.
    public var coderREST: (any CoderRESTRequesting)?

    public init(
        chatPaths: ChatPaths, manifest: any ManifestSource, upward: any UpwardSink,
        environment: [String: String], stateDirectory: String, sessionEnvironment: SessionEnvironment = SessionEnvironment(),
        connections: any ConnectionAcceptor = NoConnectionAcceptor(),
        lifecycle: any LifecycleReporter = NoLifecycleReporter(), tunnelTraffic: TunnelTraffic = TunnelTraffic(),
        metrics: any MetricsSnapshotSource = NoMetricsSnapshot(), metricsRefresh: MetricsRefresh = MetricsRefresh(), startPhase: StartPhaseWatch? = nil,
        mcpCatalog: MCPCatalog = MCPCatalog(), sessionCounts: SessionCounts = SessionCounts(),
        announcementBanners: AnnouncementBanners = AnnouncementBanners(), commandEnvironment: CommandEnvironment = CommandEnvironment(),
        coderREST: (any CoderRESTRequesting)? = nil
    ) {
        self.chatPaths = chatPaths
        self.manifest = manifest
        self.upward = upward
        self.environment = environment
        self.stateDirectory = stateDirectory
        self.sessionEnvironment = sessionEnvironment
        self.connections = connections
        self.lifecycle = lifecycle
        self.tunnelTraffic = tunnelTraffic
        self.metrics = metrics
        self.metricsRefresh = metricsRefresh
        self.startPhase = startPhase
        self.mcpCatalog = mcpCatalog
        self.sessionCounts = sessionCounts
        self.announcementBanners = announcementBanners
        self.commandEnvironment = commandEnvironment
        self.coderREST = coderREST
    }
}
