/// Where the agent's session token comes from: asked before every connection attempt, so an
/// instance-identity token is exchanged anew each time (a rebuilt workspace may have a new agent).
public protocol SessionTokenSource: Sendable {
    /// The token for the next request; throws when it cannot be had (the dial fails as any other).
    func sessionToken() async throws -> String
}

/// A token given at start (`CODER_AGENT_TOKEN`, `--agent-token-file`): the same on every call.
public struct FixedSessionToken: SessionTokenSource, CustomStringConvertible, CustomReflectable {
    public let token: String

    /// Never the token (a service's description is logged).
    public var description: String { "FixedSessionToken" }
    public var customMirror: Mirror { Mirror(self, children: []) }

    public init(_ token: String) {
        self.token = token
    }

    public func sessionToken() async throws -> String { token }
}
