import HummingbirdCore
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle

/// One listener of the HTTP API as a `Service`: HummingbirdCore's `Server` over the agent's
/// channel. Not Hummingbird's `Application`, whose `run()` also starts a date cache for the
/// `Date` header the agent writes itself; that cache builds Foundation's calendar and time
/// zone, which load ICU's data at start (about 3 MiB of pages in every agent).
public struct AgentHTTPListener: Service {
    let child: AgentHTTPChannel
    let configuration: ServerConfiguration
    let onServerRunning: @Sendable (any Channel) async -> Void
    /// NIO's singleton, or a group that is never shut down either (``EventLoopTaskExecutor``).
    let eventLoopGroup: any EventLoopGroup
    let logger: Logger

    /// Binds, calls `onServerRunning` with the listening channel, and serves until graceful
    /// shutdown (then the listener closes; open connections are the registry's to end).
    public func run() async throws {
        try await child.server(
            configuration: configuration, onServerRunning: onServerRunning, eventLoopGroup: eventLoopGroup, logger: logger
        ).run()
    }
}
