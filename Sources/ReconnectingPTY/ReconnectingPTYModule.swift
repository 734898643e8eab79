import AgentCore
import Logging
import NIOCore

/// The dashboard's web terminal: the reconnecting PTY of tailnet port 2. The executable hands
/// the tailnet's connections to ``serve(_:)``; at shutdown every session ends.
public struct ReconnectingPTYModule: AgentModule {
    public var name: String { "reconnecting pty" }
    public let server: ReconnectingPTYServer

    public init(context: AgentContext, logger: Logger) {
        server = ReconnectingPTYServer(
            manifest: context.manifest, environment: context.environment, upward: context.upward, counts: context.sessionCounts,
            command: context.commandEnvironment, logger: logger)
    }

    /// Serves `channel` (a tunnel connection to port 2, on its loop, not active yet).
    public func serve(_ channel: any Channel) -> EventLoopFuture<Void> {
        server.serve(channel)
    }

    public var services: [ModuleService] {
        [.onShutdown("reconnecting pty sessions", in: .work) { [server] in await server.shutdown() }]
    }
}
