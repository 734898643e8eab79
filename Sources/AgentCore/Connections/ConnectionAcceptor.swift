/// Where a module hands connections the agent did not accept itself (the tailnet's tunnel
/// connections to port 4), to be served by the HTTP API exactly as the ones it accepted.
///
/// AgentCore has no NIO, so the seam is only named here: AgentHTTP's `ChannelAcceptor`
/// refines it with the one way in, a NIO channel, and the host implements that. Modules
/// reach it through ``AgentContext/connections`` (a capability never imports the host).
public protocol ConnectionAcceptor: Sendable {}

/// Why a handed-over connection was not served. Its channel should be closed.
public struct ConnectionHandOverError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What kept the connection from being served.
    public enum Reason: Equatable, Sendable {
        /// No HTTP API is serving: before the agent started, after it stopped, or an agent
        /// (a test) without one.
        case notServing
        /// The listener name is not one ``ListenerName/isValid(_:)`` accepts.
        case invalidListenerName
    }

    /// Why it was refused.
    public let reason: Reason

    /// An error for `reason`.
    public init(_ reason: Reason) { self.reason = reason }

    public var description: String {
        switch reason {
        case .notServing: return "no HTTP server is serving handed-over connections"
        case .invalidListenerName: return "invalid listener name"
        }
    }
}

/// The acceptor of an agent that serves no HTTP API (tests, tools): it takes no channels,
/// so a module that hands connections over serves none (the tailnet resets port 4).
public struct NoConnectionAcceptor: ConnectionAcceptor {
    /// The acceptor of an agent without an HTTP API.
    public init() {}
}
