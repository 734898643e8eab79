import AgentCore
import AgentHTTP
import AgentLogging
import AgentProc
import AgentProto
import AgentRPC
import ArgumentParser
import Foundation
import Hummingbird
import Logging
import Metrics
import NIOCore
import Prometheus
import ServiceLifecycle
import UnixSignals

/// `workspace-agent run`: serves the agent's APIs until SIGINT or SIGTERM.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the agent (the default)."
    )

    @Option(name: .long, help: "HTTP API listen address: host:port, [v6]:port or unix:/path. Env CODER_AGENT_HTTP_ADDRESS. Default \(BindTarget.defaultAddress).")
    var httpAddress: String?

    @Option(name: .long, help: "Default working directory for processes. Env CODER_AGENT_DIRECTORY. Default: $HOME.")
    var directory: String?

    @Option(name: .long, help: "Directory for state that survives restarts. Env CODER_AGENT_STATE_DIR. Default: $XDG_STATE_HOME/workspace-agent.")
    var stateDir: String?

    @Option(name: .long, help: "trace, debug, info, notice, warning, error or critical. Env CODER_AGENT_LOG_LEVEL. Default info.")
    var logLevel: String?

    @Option(name: .long, help: "text or json. Env CODER_AGENT_LOG_FORMAT. Default text.")
    var logFormat: String?

    @Option(name: .customLong("agent-url"), help: "Control plane access URL (http[s]://host). Env CODER_AGENT_URL. Default: none (standalone).")
    var agentURL: String?

    @Option(name: .long, help: "File holding the agent token. Env CODER_AGENT_TOKEN_FILE; or the token itself in CODER_AGENT_TOKEN.")
    var agentTokenFile: String?

    @Option(name: .long, help: "Prometheus metrics listener: host:port, [v6]:port or unix:/path; empty disables. Env CODER_AGENT_PROMETHEUS_ADDRESS. Default \(AgentConfiguration.defaultPrometheusAddress).")
    var prometheusAddress: String?

    @Option(name: .long, help: "Lower children's priority (oom_score_adj, nice): true or false. Env CODER_PROC_PRIO_MGMT. Default true.")
    var procPrioMgmt: String?

    func run() async throws {
        let config: AgentConfiguration
        do {
            config = try AgentConfiguration.resolve(
                flags: .init(
                    httpAddress: httpAddress, directory: directory, stateDir: stateDir,
                    logLevel: logLevel, logFormat: logFormat, procPrioMgmt: procPrioMgmt,
                    agentURL: agentURL, agentTokenFile: agentTokenFile, prometheusAddress: prometheusAddress),
                environment: ProcessInfo.processInfo.environment)
            try config.prepareStateDirectory()
        } catch let error as AgentConfiguration.Invalid {
            // Exit status 64 (EX_USAGE) with the one-line reason.
            throw ValidationError(error.description)
        }

        AgentLogging.bootstrap(level: config.logLevel, format: config.logFormat)
        // Before any module creates a metric: those made earlier would stay no-ops.
        let metrics = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: metrics))
        let logger = Logger(label: "workspace-agent")
        if !config.httpAddress.isLoopback {
            logger.warning("HTTP API listens beyond loopback", metadata: ["address": "\(config.httpAddress)"])
        }

        let originalNofile = FileDescriptorLimit.raise()
        let environment = ProcessInfo.processInfo.environment
        let manifests = ManifestStore()
        let agentEnvironment = ManifestEnvironmentProvider(store: manifests, fallbackDirectory: config.directory)
        let controlPlane = Self.makeControlPlane(config, manifests: manifests)
        var processConfig = ProcessManager.Configuration(
            environmentProvider: agentEnvironment,
            baseEnvironment: environment,
            priority: config.processPriority ? ProcessPriority.defaults(environment: environment) : .unchanged,
            childNofileSoft: originalNofile)
        processConfig.shutdownGrace = .seconds(5)
        processConfig.adoptOrphans = true
        // One store of the paths chats touched, shared by the modules that record or read them.
        processConfig.chatPaths = ChatPaths()
        let processes = try ProcessManager(configuration: processConfig, logger: Logger(label: "workspace-agent.proc"))

        let shutdown = ShutdownController(logger: logger) { processes.killOwnedGroupsNow() }
        let connections = HTTPConnectionRegistry()
        let listening = ListeningFlag()
        let app = AgentHTTPServer.makeApplication(
            address: config.httpAddress,
            providers: [ProcessRoutes(manager: processes), MetricsRoutes(registry: metrics)],
            connections: connections,
            logger: Logger(label: "workspace-agent.http")
        ) { channel in
            listening.set()
            let address = channel.localAddress.map(Self.describe) ?? "\(config.httpAddress)"
            logger.info("agent HTTP API listening", metadata: ["address": "\(address)"])
        }
        let http = HTTPService(app: app, address: config.httpAddress, what: "the HTTP API", listening: listening, logger: logger) {
            shutdown.startupFailed()
        }
        var services: [any Service] = [http]
        if let address = config.prometheusAddress {
            let prometheusListening = ListeningFlag()
            let prometheusApp = AgentHTTPServer.makeApplication(
                address: address, providers: [MetricsRoutes(registry: metrics)],
                logger: Logger(label: "workspace-agent.prometheus")
            ) { channel in
                prometheusListening.set()
                let bound = channel.localAddress.map(Self.describe) ?? "\(address)"
                logger.info("prometheus metrics listening", metadata: ["metrics_address": "\(bound)"])
            }
            services.append(
                HTTPService(app: prometheusApp, address: address, what: "Prometheus metrics", listening: prometheusListening, logger: logger) {
                    shutdown.startupFailed()
                })
        }

        // Graceful shutdown runs in reverse order: announce SHUTTING_DOWN, terminate the
        // process groups (so long waits end), report OFF and flush, stop the HTTP server.
        // Everything fits in ShutdownController.bound: the control plane gets until half a
        // second before it for the final reports, and connections still open then (a client
        // holding a half-sent request or a stream it does not read) are closed.
        let announce = ShutdownHook {
            let lastCall = ContinuousClock.now + ShutdownController.bound - .milliseconds(500)
            controlPlane.limitShutdown(until: lastCall)
            controlPlane.setLifecycle(.shuttingDown)
            Task.detached {
                try? await Task.sleep(until: lastCall, clock: .continuous)
                connections.closeAll()
            }
        }
        let group = ServiceGroup(
            configuration: .init(services: services + [controlPlane, processes, announce], logger: logger))
        let signals = await shutdown.listen { _ in await group.triggerGracefulShutdown() }
        defer { signals.cancel() }
        logger.info("workspace agent starting", metadata: [
            "version": "\(AgentVersion.current)",
            "state_dir": "\(config.stateDir)",
            "directory": "\(config.directory ?? "")",
        ])
        do {
            try await group.run()
        } catch is StartupFailure {
            throw ExitCode(1)
        } catch {
            logger.critical("agent stopped on an error: \(error)")
            throw ExitCode(1)
        }
        logger.info("workspace agent stopped")
    }

    /// The upward session: connected when a URL is configured, standalone otherwise. Each
    /// manifest is published to the store the process API reads (spec process-api §4, step 2).
    static func makeControlPlane(_ config: AgentConfiguration, manifests: ManifestStore) -> ControlPlaneSession {
        let logger = Logger(label: "workspace-agent.rpc")
        var dialer: (any ControlPlaneDialer)?
        if let url = config.agentURL, let token = config.agentToken {
            dialer = WebSocketDialer(baseURL: url, token: token, version: "2.10", logger: logger)
        }
        let session = ControlPlaneSession(
            configuration: .init(agentVersion: AgentVersion.current), dialer: dialer, logger: logger
        ) { manifest in
            manifests.publish(ControlPlaneSession.agentManifest(from: manifest))
        }
        LogForwarder.shared.setSink { level, message in
            session.log(level: level >= .error ? .error : .warn, message)
        }
        return session
    }

    static func describe(_ address: SocketAddress) -> String {
        switch address {
        case .v4: return "\(address.ipAddress ?? "?"):\(address.port ?? 0)"
        case .v6: return "[\(address.ipAddress ?? "?")]:\(address.port ?? 0)"
        case .unixDomainSocket: return "unix:\(address.pathname ?? "")"
        }
    }
}

