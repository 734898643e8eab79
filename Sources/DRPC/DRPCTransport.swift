/// One bidirectional byte stream carrying a dRPC connection: a yamux stream upward, a
/// unix socket connection for the agent socket.
///
/// The requirements run on their caller's executor (`nonisolated(nonsending)`): a call
/// made from the yamux session's event loop stays there.
public protocol DRPCTransport: Sendable {
    /// The next received bytes, or nil at EOF.
    nonisolated(nonsending) func read() async throws -> [UInt8]?
    /// Sends bytes in order.
    nonisolated(nonsending) func write(_ bytes: [UInt8]) async throws
    /// Ends this side gracefully: the peer reads EOF. dRPC calls it once it reads no more,
    /// so a transport may drop what still arrives.
    nonisolated(nonsending) func closeWrite() async
    /// Aborts both directions.
    nonisolated(nonsending) func close() async
}

/// Why a call failed.
public enum DRPCCallError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The server answered with an Error packet.
    case remote(DRPCErrorBody)
    /// The byte stream broke the dRPC rules.
    case wire(DRPCWireError)
    /// The transport ended before the reply.
    case unexpectedEOF
    /// The transport failed.
    case transport(String)
    /// A well-formed packet arrived where the protocol does not allow it.
    case protocolViolation(String)
    /// A send after this side closed the stream (CloseSend, Close, Error or cancel).
    case closed
    /// The peer terminated the stream (Close, or Cancel: "context canceled").
    case remoteClosed(String)

    public var description: String {
        switch self {
        case .remote(let body): return "drpc: remote error (code \(body.code)): \(body.message)"
        case .wire(let error): return "drpc: \(error.description)"
        case .unexpectedEOF: return "drpc: EOF"
        case .transport(let text): return "drpc: transport: \(text)"
        case .protocolViolation(let text): return "drpc: protocol error: \(text)"
        case .closed: return "drpc: stream closed"
        case .remoteClosed(let text): return "drpc: \(text)"
        }
    }

    /// True when the server does not know the method (code 12 or `unknown rpc: `).
    public var isUnsupported: Bool {
        if case .remote(let body) = self { return body.isUnsupported }
        return false
    }
}
