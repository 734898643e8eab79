import AgentCore
import Yamux

/// Opens the connection the upward RPC runs over and returns a yamux client session on it.
/// The session ends (``YamuxSession/waitClosed()`` returns) when the connection does.
public protocol ControlPlaneDialer: Sendable {
    func dial() async throws -> YamuxSession
    /// The session with what the control plane accepted; by default ``dial()`` at
    /// ``AgentAPIVersion/current`` with no token known.
    func connect() async throws -> ControlPlaneConnection
}

extension ControlPlaneDialer {
    public func connect() async throws -> ControlPlaneConnection {
        ControlPlaneConnection(session: try await dial(), version: .current, token: nil)
    }
}

/// A dialed connection: its yamux session, the Agent API version the control plane
/// accepted, and the token it accepted (commands get it as `CODER_AGENT_TOKEN`).
public struct ControlPlaneConnection: Sendable {
    public var session: YamuxSession
    public var version: AgentAPIVersion
    public var token: String?

    public init(session: YamuxSession, version: AgentAPIVersion, token: String?) {
        self.session = session
        self.version = version
        self.token = token
    }
}

/// Why a dial failed before the WebSocket was up.
public enum DialError: Error, Equatable, CustomStringConvertible {
    case invalidURL(String)
    /// The control plane answered the upgrade with an HTTP status (coderd: 400 bad
    /// version, 401 bad token), with the `message` of its JSON body when there is one.
    case refused(status: Int, message: String)
    case timedOut

    public var description: String {
        switch self {
        case .invalidURL(let url): return "invalid control plane URL \(url)"
        case .refused(let status, let message): return "control plane refused the connection: HTTP \(status)\(message.isEmpty ? "" : ": " + message)"
        case .timedOut: return "control plane did not answer the WebSocket upgrade in time"
        }
    }
}
