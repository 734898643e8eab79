import AgentCore
import Glibc
import Logging
import ServiceLifecycle

/// The boundary log proxy as a capability module: the audit-log socket and the forwarder
/// that sends its batches upward through AgentCore's upward seam (never importing the RPC).
public struct BoundaryLogModule: AgentModule {
    let server: BoundarySocketServer?
    let forwarder: BoundaryForwarder

    public var name: String { "boundary log proxy" }

    public init(configuration: BoundaryLogOptions.Configuration, context: AgentContext) {
        let spool =
            configuration.spoolBytes > 0
            ? BoundarySpool(
                directory: context.stateDirectory + "/boundary-spool", maxBytes: configuration.spoolBytes,
                logger: Logger(label: "workspace-agent.boundary"))
            : nil
        let forwarder = BoundaryForwarder(upward: context.upward, spool: spool)
        self.forwarder = forwarder
        server = configuration.socketPath.map {
            BoundarySocketServer(configuration: .init(path: $0, mode: mode_t(configuration.socketMode)), forwarder: forwarder)
        }
    }

    /// Both stop in the `work` phase, the socket first, so the forwarder can spool what the
    /// last readers queued, and before the control-plane session (`upward`) flushes. A
    /// socket that cannot start only logs: the agent runs on without the proxy.
    public var services: [ModuleService] {
        var services: [ModuleService] = []
        if let server { services.append(ModuleService("boundary log socket", server, stopsIn: .work, onSuccess: .ignore)) }
        services.append(ModuleService("boundary log forwarder", forwarder, stopsIn: .work))
        return services
    }

    /// Whether the socket is listening (for tests and health).
    public var isListening: Bool { server?.isListening ?? false }
}
