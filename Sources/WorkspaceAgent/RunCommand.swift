import AgentCore
import GitCredentials
import AgentFiles
import AgentHTTP
import AgentHost
import AgentLogging
import AgentProc
import AgentRPC
import AgentSocket
import AgentSSH
import AgentSpeedtest
import ReconnectingPTY
import ArgumentParser
import BoundaryLogs
import Diagnostics
import ChatContext
import Desktop
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import GitWatch
import HostStats
import Logging
import MCPEngine
import Metrics
import Prometheus
import Scripts
import Tailnet

/// `workspace-agent run`: serves the agent's APIs until SIGINT or SIGTERM.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the agent (the default)."
    )

    @OptionGroup var daemon: DaemonOptions

    func run() async throws {
        try await daemon.run(as: .workspaceAgent)
    }
}

/// The agent's flags and the body that starts it, shared by `workspace-agent run` and
/// `coder agent`.
///
/// It reads each module's options, builds the modules and hands them to the host: nothing
/// else. Adding a capability is one `mount` (or `add`) line here and its options group.
struct DaemonOptions: ParsableArguments {
    /// The name the daemon was started under: it decides the error texts and exit codes.
    enum Invocation {
        /// `workspace-agent [run]`: standalone without a URL; a bad setting exits 64.
        case workspaceAgent
        /// `coder agent`: the reference's rules (a URL is required; every error exits 1).
        case coderAgent
    }

    @OptionGroup var agent: AgentOptions
    @OptionGroup var http: HTTPOptions
    @OptionGroup var logging: LoggingOptions
    @OptionGroup var controlPlane: ControlPlaneOptions
    @OptionGroup var auth: AgentAuthOptions
    @OptionGroup var processes: ProcessOptions
    @OptionGroup var socket: AgentSocketOptions
    @OptionGroup var desktop: DesktopOptions
    @OptionGroup var boundary: BoundaryLogOptions
    @OptionGroup var tailnet: TailnetOptions
    @OptionGroup var scripts: ScriptsOptions
    @OptionGroup var chatContext: ChatContextOptions
    @OptionGroup var ssh: SSHOptions
    @OptionGroup var accepted: AcceptedReferenceOptions

    func run(as invocation: Invocation) async throws {
        FreeMemory.configureAllocator()
        // Its outcome is for tests: a warm-up that did not run leaves the agent as it was.
        RuntimeWarmUp.httpPipelines()
        // Kept before the token is scrubbed: a prebuild's reinitialisation starts the binary again with them.
        let startArguments = CommandLine.arguments
        var startEnvironment = ProcessInfo.processInfo.environment
        let reinitOwner = startEnvironment.removeValue(forKey: ReinitRestart.ownerVariable)
        unsetenv(ReinitRestart.ownerVariable)
        let settings = Settings(environment: startEnvironment)
        // The token stays in the agent's memory (settings, the control plane's configuration)
        // but leaves its environment block and argv, which /proc shows.
        EnvironmentScrub.scrub("CODER_AGENT_TOKEN")
        EnvironmentScrub.scrubArgument("--agent-token")
        // Read once, then not inherited by children (as the reference does). Nor is an inherited
        // token: a command gets one only from the manifest's layer, so `--hide-agent-token`
        // keeps it from every command.
        var environment = startEnvironment
        environment["CODER_AGENT_TOKEN"] = nil
        // As the reference's `coder agent`: the binary's directory last on PATH, so that
        // children find `coder` (the link beside it) unless an earlier entry has one.
        if let directory = OwnExecutable.directory() {
            let path = OwnExecutable.path(environment["PATH"], appending: directory)
            environment["PATH"] = path
            setenv("PATH", path, 1)
        }
        for variable in ChatContextOptions.variables {
            environment[variable] = nil
            unsetenv(variable)
        }
        let config:
            (
                agent: AgentOptions.Configuration, http: HTTPOptions.Configuration, logging: AgentLogging.Configuration,
                controlPlane: ControlPlaneOptions.Configuration, processes: ProcessOptions.Configuration,
                socket: AgentSocketOptions.Configuration, desktop: DesktopOptions.Configuration,
                boundary: BoundaryLogOptions.Configuration
            )
        let tailnetConfig: TailnetOptions.Configuration
        let scriptsConfig: ScriptsOptions.Configuration
        let chatContextConfig: ChatContextOptions.Configuration
        let sshConfig: SSHOptions.Configuration
        var authConfig: AgentAuthOptions.Configuration
        do {
            do {
                authConfig = try auth.resolve(settings, controlPlane: controlPlane, urlRequired: invocation == .coderAgent)
            } catch {
                // The reference's wording (`cli/agent.go`).
                throw invocation == .coderAgent ? ConfigurationError("create agent client: \(error.description)") : error
            }
            if let url = authConfig.controlPlane.url {
                // The header command runs once, now; its failure ends the agent.
                authConfig = authConfig.connecting(headers: try auth.headers(settings, url: url), environment: startEnvironment)
                // The dialer's token, remembered for `/reinit`.
                authConfig.controlPlane.tokenSource = authConfig.controlPlane.sessionTokenSource.map { LatestSessionToken($0) }
            }
            tailnetConfig = try tailnet.resolve(settings)
            sshConfig = try ssh.resolve(settings)
            chatContextConfig = try chatContext.resolve(settings)
            scriptsConfig = try scripts.resolve(settings)
            config = (
                try agent.resolve(settings), try http.resolve(settings), try logging.resolve(settings),
                authConfig.controlPlane, try processes.resolve(settings), try socket.resolve(settings),
                try desktop.resolve(settings), try boundary.resolve(settings)
            )
            _ = try accepted.resolve(settings)
            try config.agent.prepareStateDirectory()
        } catch {
            switch invocation {
            case .workspaceAgent:
                // Exit status 64 (EX_USAGE) with the one-line reason.
                throw ValidationError("\(error)")
            case .coderAgent:
                throw CoderCommandFailure("\(error)")
            }
        }

        if config.agent.hideAgentToken {
            // Nor the path of its file: the desktop's programs start from this environment, not
            // from every command's layers (which leave it out as well; MCP servers never get
            // any CODER_AGENT_ variable).
            environment[CommandEnvironment.tokenFileVariable] = nil
            unsetenv(CommandEnvironment.tokenFileVariable)
        }
        let log = AgentLogging.bootstrap(config.logging, file: RotatingLogFile(directory: scriptsConfig.logDirectory))
        // Before any module creates a metric: those made earlier would stay no-ops.
        let metrics = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(AgentMetricsFactory(registry: metrics))
        let processMetrics = ProcessMetrics(registry: metrics, version: AgentVersion.current, commit: BuildInfo.commit)
        let metricsRefresh = MetricsRefresh()
        metricsRefresh.register { processMetrics.update() }
        let logger = Logger(label: "workspace-agent")
        if !config.http.address.isLoopback {
            logger.warning("\(HTTPOptions.beyondLoopbackWarning("HTTP API"))", metadata: ["address": "\(config.http.address)"])
        }
        for (name, address) in [("metrics listener", config.agent.prometheusAddress), ("debug listener", config.agent.debugAddress)] {
            if let address, !address.isLoopback {
                logger.warning("\(HTTPOptions.beyondLoopbackWarning(name))", metadata: ["address": "\(address)"])
            }
        }

        var hostConfiguration = AgentHost.Configuration()
        hostConfiguration.accessLog = config.http.accessLog
        let host = AgentHost(configuration: hostConfiguration, logger: logger)
        // Fetched by the control-plane session, shown by SSH login shells.
        let banners = AnnouncementBanners()
        let upward = ControlPlaneModule(
            configuration: config.controlPlane, agentVersion: AgentVersion.current, clock: host.clock,
            participants: host.upwardParticipants, startOutcomeFromModule: true, banners: banners,
            subsystems: config.agent.subsystems,
            prepareManifest: VSCodeGitAuthOverride.preparation(
                home: { ManifestSecrets.homeDirectory() ?? "" }, dataHome: startEnvironment["XDG_DATA_HOME"],
                logger: log.localLogger(label: "workspace-agent.gitauth")),
            logger: log.localLogger(label: "workspace-agent.rpc"))
        log.forwarder.connect(to: upward.session)
        let chatPaths = ChatPaths()
        // The desktop publishes its DISPLAY here; the process API adds it to children.
        let sessionEnvironment = SessionEnvironment()
        // When the first manifest's startup scripts end (what the chat context waits for).
        let lifecycle = StartPhaseWatch(forwardingTo: upward.session)
        let context = AgentContext(
            chatPaths: chatPaths, manifest: upward.session, upward: upward.session,
            environment: environment, stateDirectory: config.agent.stateDir, sessionEnvironment: sessionEnvironment,
            connections: host.connections, lifecycle: lifecycle,
            metrics: PrometheusSnapshot(registry: metrics, refresh: metricsRefresh), metricsRefresh: metricsRefresh,
            startPhase: config.controlPlane.connects ? lifecycle : nil, announcementBanners: banners,
            commandEnvironment: CommandEnvironment(
                passesAgentToken: !config.agent.hideAgentToken, agentSocketPath: config.socket.enabled ? config.socket.path : nil),
            coderREST: Self.coderREST(config.controlPlane))
        let childFileLimit = FileDescriptorLimit.raise()

        // The agent's own ports as bound (port 0: the kernel's choice), left out of listening-ports.
        let ownPorts = OwnListenerPorts(Self.ownPorts((config.agent, config.http)))
        host.listen(
            on: config.http.address, for: "the HTTP API", logMessage: "agent HTTP API listening",
            onListening: { ownPorts.insert(boundAddress: $0) })
        // Optional: when its port is busy the agent warns and serves on (the API has /metrics too).
        if let address = config.agent.prometheusAddress {
            host.listen(
                on: address, for: "Prometheus metrics", name: ListenerName.prometheus, logMessage: "prometheus metrics listening",
                addressKey: "metrics_address", required: false,
                mounts: [HTTPMount(MetricsModule(registry: metrics, refresh: metricsRefresh), at: "/")],
                onListening: { ownPorts.insert(boundAddress: $0) })
        }
        host.add(upward)
        host.add(
            ChatPathsModule(
                journal: ChatPathsJournal(paths: chatPaths, file: config.agent.stateDir + "/chat-paths.json") { message in
                    logger.warning("\(message)")
                }))
        host.mount(try ProcessModule(configuration: config.processes, context: context, childFileLimit: childFileLimit), at: "/api/v0/processes")
        host.mount(FilesModule(context: context), at: "/api/v0")
        host.mount(GitWatchModule(context: context), at: "/api/v0/git")
        host.mount(DesktopModule(configuration: config.desktop, context: context), at: "/api/v0/desktop")
        host.mount(MetricsModule(registry: metrics, refresh: metricsRefresh), at: "/")
        host.mount(MetricsModule(registry: metrics, refresh: metricsRefresh, path: "prometheus"), at: "/debug")
        let diagnostics = DiagnosticsModule(context: context, recentLogs: log.recent, ignoredPorts: ownPorts)
        host.mount(diagnostics, at: "/")
        // Built here so the agent socket can serve its context calls; mounted below.
        let chatContextModule = ChatContextModule(
            configuration: chatContextConfig, context: context, directory: config.processes.directory,
            agentToken: config.controlPlane.token)
        host.add(AgentSocketModule(configuration: config.socket, context: context, chatContext: chatContextModule.manager))
        host.add(BoundaryLogModule(configuration: config.boundary, context: context))
        host.mount(
            try ScriptsModule(
                configuration: scriptsConfig, context: context, agentToken: config.controlPlane.token,
                agentSocketPath: config.socket.enabled ? config.socket.path : nil,
                priority: config.processes.priority ? ProcessPriority.defaults(environment: environment) : .unchanged, clock: host.clock,
                logger: log.localLogger(label: "workspace-agent.scripts")),
            at: "/api/v0/scripts")
        host.mount(chatContextModule, at: "/api/v0")
        host.mount(
            MCPEngineModule(
                configFiles: chatContextConfig.mcpConfigFiles, clientVersion: AgentVersion.current, context: context,
                directory: config.processes.directory, agentToken: config.controlPlane.token),
            at: "/api/v0/mcp")
        // Only with a control plane: coderd reaches the HTTP API through it (port 4).
        // SSH: tailnet ports 1 and 22, and the loopback listener of `--ssh-address`.
        let sshModule = SSHModule(configuration: sshConfig, context: context, logger: Logger(label: "workspace-agent.ssh"))
        host.add(sshModule)
        let tunnelPorts = TunnelPortServices()
        for port: UInt16 in [1, 22] { tunnelPorts.register(port: port) { channel, _ in sshModule.serve(channel) } }
        // CPU, memory and volume usage for the dashboard, at the cadence coderd configures.
        host.add(ResourcesMonitoringModule(logger: log.localLogger(label: "workspace-agent.resources-monitor")))
        // The reconnecting PTY (the dashboard's web terminal): tailnet port 2.
        let reconnectingPTY = ReconnectingPTYModule(context: context, logger: Logger(label: "workspace-agent.reconnecting-pty"))
        host.add(reconnectingPTY)
        tunnelPorts.register(port: 2) { channel, _ in reconnectingPTY.serve(channel) }
        // The speed test (`coder speedtest`): tailnet port 3.
        let speedtest = SpeedtestServer()
        tunnelPorts.register(port: 3) { channel, _ in speedtest.serve(channel) }
        let tailnet = TailnetModule(
            configuration: tailnetConfig,
            accessURL: config.controlPlane.connects ? config.controlPlane.url : nil,
            context: context, ports: tunnelPorts, logger: log.localLogger(label: "workspace-agent.tailnet"))
        host.mount(tailnet, at: "/api/v0/tailnet")
        host.mount(tailnet.diagnostics, at: "/")
        // The reference's debug server: optional like the metrics listener.
        if let address = config.agent.debugAddress {
            host.listen(
                on: address, for: "the debug server", name: "debug", logMessage: "debug server listening", addressKey: "debug_address",
                required: false, mounts: [HTTPMount(DebugListenerRoutes(modules: [diagnostics, tailnet.diagnostics]), at: "/")],
                onListening: { ownPorts.insert(boundAddress: $0) })
        }
        if let pprof = config.agent.pprofAddress {
            logger.debug("pprof address accepted; nothing listens there (no Go profiler in this agent)", metadata: ["pprof_address": "\(pprof)"])
        }

        // A claimed prebuild's new owner: the agent shuts down and starts again.
        let reinit = ReinitRestart(lastOwner: reinitOwner, logger: log.localLogger(label: "workspace-agent.reinit"))
        if let url = config.controlPlane.url, let latest = config.controlPlane.tokenSource as? LatestSessionToken {
            host.add(
                reinit.module(
                    rest: CoderRESTClient(baseURL: url, token: nil, headers: config.controlPlane.headers.pairs), tokens: latest.remembered,
                    host: host))
        }

        logger.info(
            "workspace agent starting",
            metadata: [
                "version": "\(AgentVersion.current)",
                "commit": "\(BuildInfo.commit)",
                "state_dir": "\(config.agent.stateDir)",
                "directory": "\(config.processes.directory ?? "")",
            ])
        let release = Task { [enabled = config.agent.releaseStartupPages] in
            if enabled { await StartupPages.releaseAfterStartup() }
        }
        defer { release.cancel() }
        do {
            try await host.run()
        } catch is StartupFailure {
            throw ExitCode(1)
        } catch {
            logger.critical("agent stopped on an error: \(error)")
            throw ExitCode(1)
        }
        logger.info("workspace agent stopped")
        reinit.restartIfRequested(arguments: startArguments, environment: startEnvironment)
    }

    /// The agent's REST client for coderd: its token and extra headers; under instance
    /// identity, the connection's latest exchanged token. nil standalone.
    static func coderREST(_ controlPlane: ControlPlaneOptions.Configuration) -> (any CoderRESTRequesting)? {
        guard let url = controlPlane.url else { return nil }
        if let token = controlPlane.token {
            return CoderRESTClient(baseURL: url, token: token, headers: controlPlane.headers.pairs)
        }
        guard let latest = controlPlane.tokenSource as? LatestSessionToken else { return nil }
        return ExchangingRESTClient(
            rest: CoderRESTClient(baseURL: url, token: nil, headers: controlPlane.headers.pairs), source: latest.remembered, exchangesOnce: false)
    }

    /// The agent's own TCP ports (its HTTP API, the metrics listener), which the listening
    /// ports route leaves out as the reference leaves out its own.
    static func ownPorts(_ config: (agent: AgentOptions.Configuration, http: HTTPOptions.Configuration)) -> Set<UInt16> {
        var ports: Set<UInt16> = []
        for target in [config.http.address, config.agent.prometheusAddress, config.agent.debugAddress].compactMap({ $0 }) {
            if case .tcp(_, let port) = target.kind, let port = UInt16(exactly: port), port != 0 { ports.insert(port) }
        }
        return ports
    }
}
