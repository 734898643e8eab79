/// What a transport hands to its session, in the order it read it.
public enum MCPTransportEvent: Sendable {
    /// One JSON-RPC message from the server.
    case message(JSONRPCMessage)
    /// Output that is not a JSON-RPC message (the reason); the session counts it.
    case invalid(String)
    /// The request with this id cannot get an answer (its HTTP exchange failed); the session
    /// goes on.
    case requestFailed(JSONRPCID, MCPError)
    /// The session is over (the server exited, went away, or was closed); the last event.
    case ended(String)
}

/// A stdio server's events are the transport's.
public typealias MCPStdioEvent = MCPTransportEvent

/// How a session reaches its server: one conformer per transport (stdio, Streamable HTTP,
/// HTTP+SSE). The session keeps the request table, timeouts, cancellation and event
/// accounting; a transport only moves messages and reports what it read through the event
/// callback it was made with.
public protocol MCPTransport: Sendable {
    /// The `.mcp.json` name of the server.
    var serverName: String { get }
    /// Queues one message without waiting for it to be delivered; a failure to deliver a
    /// request later arrives as ``MCPTransportEvent/requestFailed(_:_:)``.
    func send(_ message: JSONRPCMessage) throws(MCPError)
    /// The request `id` was given up (timed out, cancelled): stop waiting for its answer.
    func abandon(_ id: JSONRPCID)
    /// `initialize` agreed on `version` (HTTP sends it on every later request).
    func negotiated(protocolVersion version: String)
    /// Starts closing (idempotent) without waiting.
    func requestClose()
    /// Closes and returns once the transport's resources are released.
    func close() async
}

extension MCPTransport {
    public func abandon(_ id: JSONRPCID) {}
    public func negotiated(protocolVersion version: String) {}
}

extension MCPStdioProcess: MCPTransport {
    public func send(_ message: JSONRPCMessage) throws(MCPError) {
        try send(message.encodedLine())
    }
}
