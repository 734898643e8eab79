import AgentHTTP
import AgentLogging
import AgentProc
import ArgumentParser
import Foundation
import Hummingbird
import Logging
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

    @Option(name: .long, help: "Lower children's priority (oom_score_adj, nice): true or false. Env CODER_PROC_PRIO_MGMT. Default true.")
    var procPrioMgmt: String?

    func run() async throws {
        let config: AgentConfiguration
        do {
            config = try AgentConfiguration.resolve(
                flags: .init(
                    httpAddress: httpAddress, directory: directory, stateDir: stateDir,
                    logLevel: logLevel, logFormat: logFormat, procPrioMgmt: procPrioMgmt),
                environment: ProcessInfo.processInfo.environment)
            try config.prepareStateDirectory()
        } catch let error as AgentConfiguration.Invalid {
            // Exit status 64 (EX_USAGE) with the one-line reason.
            throw ValidationError(error.description)
        }

        AgentLogging.bootstrap(level: config.logLevel, format: config.logFormat)
        let logger = Logger(label: "workspace-agent")
        if !config.httpAddress.isLoopback {
            logger.warning("HTTP API listens beyond loopback", metadata: ["address": "\(config.httpAddress)"])
        }

        let originalNofile = FileDescriptorLimit.raise()
        let environment = ProcessInfo.processInfo.environment
        var processConfig = ProcessManager.Configuration(
            environmentProvider: StaticEnvironmentProvider(directory: config.directory),
            baseEnvironment: environment,
            priority: config.processPriority ? ProcessPriority.defaults(environment: environment) : .unchanged,
            childNofileSoft: originalNofile)
        processConfig.shutdownGrace = .seconds(5)
        let processes = try ProcessManager(configuration: processConfig, logger: Logger(label: "workspace-agent.proc"))

        let app = AgentHTTPServer.makeApplication(
            address: config.httpAddress,
            providers: [ProcessRoutes(manager: processes)],
            logger: Logger(label: "workspace-agent.http")
        ) { channel in
            let address = channel.localAddress.map(Self.describe) ?? "\(config.httpAddress)"
            logger.info("agent HTTP API listening", metadata: ["address": "\(address)"])
        }

        // Graceful shutdown runs in reverse order: processes first (so long waits end),
        // then the HTTP server.
        let group = ServiceGroup(
            configuration: .init(
                services: [app, processes],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        logger.info("workspace agent starting", metadata: [
            "version": "\(AgentVersion.current)",
            "state_dir": "\(config.stateDir)",
            "directory": "\(config.directory ?? "")",
        ])
        try await group.run()
        logger.info("workspace agent stopped")
    }

    static func describe(_ address: SocketAddress) -> String {
        switch address {
        case .v4: return "\(address.ipAddress ?? "?"):\(address.port ?? 0)"
        case .v6: return "[\(address.ipAddress ?? "?")]:\(address.port ?? 0)"
        case .unixDomainSocket: return "unix:\(address.pathname ?? "")"
        }
    }
}

import NIOCore
