import AgentCore
import AgentHTTP
import Hummingbird
import Logging
import ServiceLifecycle

/// The manifest's scripts as a capability module, mounted at `/api/v0/scripts`: the start,
/// cron and stop scripts with the lifecycle outcomes, their logs and `ScriptCompleted`
/// reports sent upward from a journal on disk, and the per-session metadata, app-health and
/// stats reports.
///
/// Shutdown: at `announce` the start-phase runs are cancelled; the `scripts` phase runs the
/// stop scripts (the agent socket still serves them) and reports the
/// final state; what they logged goes upward before the session closes (``UpwardParticipant/drained()``).
public struct ScriptsModule: HTTPModule {
    let runner: ScriptRunner
    let uploads: ScriptUploads
    let manifest: any ManifestSource
    let participant: ScriptsParticipant

    public var name: String { "scripts" }

    /// - Parameters:
    ///   - agentToken: scripts' `CODER_AGENT_TOKEN` when the manifest carries no session token.
    ///   - agentSocketPath: handed to scripts as `CODER_AGENT_SOCKET_PATH` (nil when the socket is off).
    ///   - priority: oom_score_adj and nice for scripts (`--proc-prio-mgmt`, as the process API's children).
    ///   - clock: the agent's shutdown clock, which grows by what stop scripts may take.
    /// - Throws: when the upload journal under the state dir cannot be opened.
    public init(
        configuration: ScriptsOptions.Configuration, context: AgentContext, agentToken: String?, agentSocketPath: String?,
        priority: ProcessPriority = .unchanged, clock: ShutdownClock?, logger: Logger
    ) throws {
        let metrics = ScriptsMetrics()
        let uploads: ScriptUploads
        do {
            uploads = try ScriptUploads(directory: context.stateDirectory + "/scripts", metrics: metrics)
        } catch {
            throw ScriptsStartError(description: "scripts: cannot open the upload journal under \(context.stateDirectory)/scripts: \(error)")
        }
        let runner = ScriptRunner(
            configuration: configuration,
            environment: .init(
                agentEnvironment: context.environment, agentToken: agentToken, agentSocketPath: agentSocketPath, priority: priority,
                command: context.commandEnvironment, latestManifest: context.manifest),
            uploads: uploads, lifecycle: context.lifecycle, clock: clock, metrics: metrics, logger: logger)
        self.runner = runner
        self.uploads = uploads
        self.manifest = context.manifest
        let source = context.manifest
        // One for the agent's life: a window a failed report could not send goes with the next.
        let stats = StatsReporter(traffic: context.tunnelTraffic, metrics: context.metrics, sessions: context.sessionCounts, logger: logger)
        self.participant = ScriptsParticipant(
            uploads: uploads, metrics: metrics, logger: logger,
            reporters: { ScriptsReporters.make(manifest: source.currentManifest, stats: stats, runner: runner, logger: logger) },
            shuttingDown: { runner.isShuttingDown })
    }

    public var upwardParticipants: [any UpwardParticipant] { [participant] }

    public var services: [ModuleService] {
        [
            .onShutdown("scripts: cancel start scripts", in: .announce) { [runner] in runner.beginShutdown() },
            ModuleService("scripts", ScriptsService(runner: runner, manifest: manifest), stopsIn: .scripts),
        ]
    }

    public func routes(_ routes: inout AgentRoutes) {
        ScriptsRoutes(runner: runner).add(to: &routes)
    }

    public func terminateNow() {
        runner.terminateNow()
    }
}

/// Why the module could not be built.
public struct ScriptsStartError: Error, CustomStringConvertible {
    public var description: String
}

/// Runs the start phase with the first manifest; at its shutdown (the `scripts` phase) runs
/// the stop scripts; when cancelled instead, ends every run.
struct ScriptsService: Service {
    let runner: ScriptRunner
    let manifest: any ManifestSource

    func run() async throws {
        let manifests = manifest.manifests()
        let watch = Task {
            for await manifest in manifests { await runner.start(with: manifest) }
        }
        do {
            try await gracefulShutdown()
            watch.cancel()
            await runner.runStopScripts()
        } catch {
            watch.cancel()
            await runner.stop()
        }
    }
}
