import AgentCore
import AgentHTTP
import Hummingbird
import Logging

/// The process API as a capability module: its routes, the process manager as a service
/// that stops in the `work` phase (its process groups are terminated before the final
/// reports go up), and the watchdog's last resort (SIGKILL to every group it owns).
public struct ProcessModule: HTTPModule {
    public let manager: ProcessManager

    public var name: String { "processes" }

    /// Wraps a manager made elsewhere (tests).
    public init(manager: ProcessManager) {
        self.manager = manager
    }

    /// The daemon's process API: the manifest gives the environment and default directory,
    /// running sessions (the desktop) add theirs, exits are recorded in the chat paths, and
    /// the agent adopts and reaps orphans.
    /// - Parameter childFileLimit: RLIMIT_NOFILE soft limit restored in children (the agent
    ///   raised its own).
    public init(
        configuration: ProcessOptions.Configuration, context: AgentContext, childFileLimit: Int?,
        logger: Logger = Logger(label: "workspace-agent.proc")
    ) throws {
        var processes = ProcessManager.Configuration(
            environmentProvider: ManifestEnvironmentProvider(
                source: context.manifest, fallbackDirectory: configuration.directory, base: context.environment,
                command: context.commandEnvironment),
            baseEnvironment: context.environment,
            priority: configuration.priority ? ProcessPriority.defaults(environment: context.environment) : .unchanged,
            childNofileSoft: childFileLimit)
        processes.shutdownGrace = .seconds(5)
        processes.adoptOrphans = true
        processes.chatPaths = context.chatPaths
        processes.sessionEnvironment = context.sessionEnvironment
        // Records, output spools and tool-call claims survive restarts under the state dir.
        processes.stateDirectory = context.stateDirectory
        processes.spoolLimits = configuration.spoolLimits
        processes.spoolOutput = configuration.spool
        manager = try ProcessManager(configuration: processes, logger: logger)
    }

    public var services: [ModuleService] {
        [ModuleService("processes", manager, stopsIn: .work)]
    }

    public func terminateNow() {
        manager.killOwnedGroupsNow()
    }

    public func routes(_ routes: inout AgentRoutes) {
        ProcessRoutes(manager: manager).add(to: &routes)
    }
}
