import AgentCore
import AgentHTTP
import Hummingbird
import ServiceLifecycle

/// The desktop as a capability module, mounted at `/api/v0/desktop`: its status, the VNC
/// bridge, the computer-use actions (in process, through the agent's own VNC connection and
/// reads of its X server) and recordings, over one desktop started on first use. While it
/// runs, its `DISPLAY` is in ``AgentContext/sessionEnvironment`` for started processes.
public struct DesktopModule: HTTPModule {
    public let supervisor: DesktopSupervisor
    let recorder: Recorder
    let runner: ActionRunner

    public var name: String { "desktop" }

    public init(configuration: DesktopOptions.Configuration = .init(), context: AgentContext) {
        var supervision = DesktopSupervisor.Configuration(
            width: configuration.width, height: configuration.height, idleTimeout: configuration.idleTimeout,
            environment: context.environment, stateDirectory: context.stateDirectory,
            sessionEnvironment: context.sessionEnvironment)
        supervision.vncTimeout = configuration.vncTimeout
        supervisor = DesktopSupervisor(configuration: supervision)
        recorder = Recorder(supervisor: supervisor)
        runner = ActionRunner(supervisor: supervisor)
    }

    /// The idle watch runs while the agent does; at shutdown (`work` phase) recordings end
    /// and the desktop stops.
    public var services: [ModuleService] {
        let supervisor = self.supervisor
        let recorder = self.recorder
        let module = self
        let watch = ClosureService {
            await cancelWhenGracefulShutdown {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(5))
                    await module.idleWatchPass()
                }
            }
        }
        return [
            ModuleService("desktop idle watch", watch, stopsIn: .work),
            .onShutdown("desktop", in: .work) {
                await recorder.close()
                await supervisor.close()
            },
        ]
    }

    /// One pass of the idle watch: the desktop stops once idle for its timeout, unless a
    /// recording runs; recordings stop after ``Recorder/idleStop`` without an action.
    func idleWatchPass() async {
        await supervisor.stopIfIdle(recording: await recorder.runningCount > 0)
        await recorder.stopIdle(lastActivity: await supervisor.lastActivityInstant)
    }

    /// Every handler on the pool: actions wait on the VNC connection's lock (held through
    /// a blocking read of an update); the supervisor stats and spawns. (Reads of the X
    /// server and PNG encoding run on the thread pool.)
    public func routes(_ routes: inout AgentRoutes) {
        let action = ActionRoute(supervisor: supervisor, runner: runner)
        let recordings = RecordingRoutes(supervisor: supervisor, recorder: recorder)
        let status = DesktopStatusRoute(supervisor: supervisor)
        routes.get { request, context in await status.handle(request, context) }
        routes.post("action") { request, context in try await action.handle(request, context) }
        routes.post("recording/start") { request, context in try await recordings.start(request, context) }
        routes.post("recording/stop") { request, context in try await recordings.stop(request, context) }
        routes.webSocket(VNCBridge(supervisor: supervisor).route())
    }
}
