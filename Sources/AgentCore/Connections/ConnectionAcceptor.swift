#if canImport(Glibc)
import Glibc
#endif

/// Serves connections the agent did not accept itself.
///
/// A module that receives stream connections somewhere of its own (the tailnet: each TCP
/// connection to the agent's tunnel port 4 becomes one end of a unix socketpair) hands each
/// one here, and the agent's HTTP API serves it exactly as a connection it accepted: the
/// same routes and middleware, limits, deadlines and guards, the same connection cap and
/// metrics, closed at shutdown with the others. The host implements it; modules reach it
/// through ``AgentContext/connections`` (a capability never imports the host).
public protocol ConnectionAcceptor: Sendable {
    /// Takes ownership of `descriptor` and serves it; returns at once and never blocks, so it
    /// may be called from any thread (a network stack's own thread too).
    ///
    /// - Parameters:
    ///   - descriptor: one end of a connected stream socket (a socketpair end). It belongs to
    ///     the acceptor from this call on, whatever the outcome: on a throw it is closed.
    ///   - listener: where the connection came from (``ListenerName``: `"tailnet"`); every
    ///     request on it sees it as `AgentRequestContext.listener`.
    ///   - remote: the peer's address as text (`[fd7a:115c:a1e0::1]:52110`), for requests and
    ///     logs; nil when unknown. At most ``ListenerName/maxRemoteBytes`` bytes are kept.
    /// - Throws: ``ConnectionHandOverError`` when the connection is not served (the
    ///   descriptor has been closed).
    func serve(descriptor: CInt, listener: String, remote: String?) throws(ConnectionHandOverError)
}

/// Why a handed-over connection was not served. Its descriptor has been closed.
public struct ConnectionHandOverError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What kept the connection from being served.
    public enum Reason: Equatable, Sendable {
        /// No HTTP API is serving: before the agent started, after it stopped, or an agent
        /// (a test) without one.
        case notServing
        /// The descriptor is not a stream socket: the errno of the check (ENOTSOCK, EBADF),
        /// or 0 for a socket of another type.
        case notAStreamSocket(errno: Int32)
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
        case .notAStreamSocket(let code):
            return code == 0 ? "not a stream socket" : "not a stream socket: \(SystemCallError.message(code))"
        case .invalidListenerName: return "invalid listener name"
        }
    }
}

/// An acceptor for an agent that serves no HTTP API (tests, tools): every connection handed
/// to it is closed and refused with ``ConnectionHandOverError/Reason/notServing``.
public struct NoConnectionAcceptor: ConnectionAcceptor {
    /// The acceptor of an agent without an HTTP API.
    public init() {}

    /// Closes `descriptor` and throws ``ConnectionHandOverError/Reason/notServing``.
    public func serve(descriptor: CInt, listener: String, remote: String?) throws(ConnectionHandOverError) {
        close(descriptor)
        throw ConnectionHandOverError(.notServing)
    }
}
