import AgentCore
import AgentHTTP
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

/// The HTTP server as a service that reports a failure to start in one clear line (what,
/// which address, the OS error) and has the agent exit within a second; an optional
/// listener's failure is a warning instead, and the service waits for shutdown.
struct HTTPService: Service, CustomStringConvertible {
    let app: AgentHTTPServer.App
    let address: BindTarget
    /// What listens, for the failure line ("the HTTP API").
    let what: String
    /// False for a listener the agent runs without when it cannot bind (Prometheus).
    let required: Bool
    /// Set once the listener is bound (from the application's `onServerRunning`).
    let listening: OnceFlag
    let logger: Logger
    let onStartupFailure: @Sendable () -> Void

    var description: String { "HTTPService(\(what), \(address))" }

    func run() async throws {
        do {
            try await app.run()
        } catch {
            if listening.isSet { throw error }
            guard required else {
                logger.warning("cannot listen on \(address) for \(what): \(Self.reason(error)); the agent runs without it")
                // Returning now would end the agent (the group's default); the rest serves on.
                try? await gracefulShutdown()
                return
            }
            logger.critical("cannot listen on \(address) for \(what): \(Self.reason(error))")
            onStartupFailure()
            throw StartupFailure()
        }
    }

    /// `address already in use (errno 98)` for the OS errors NIO reports.
    static func reason(_ error: any Error) -> String {
        if let io = error as? IOError {
            return "\(SystemCallError.message(io.errnoCode)) (errno \(io.errnoCode))"
        }
        return "\(error)"
    }
}

/// A service could not start; it has already logged why (the agent exits with status 1).
public struct StartupFailure: Error {}
