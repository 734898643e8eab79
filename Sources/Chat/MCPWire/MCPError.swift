/// Why an MCP operation failed; `description` is the text callers show (and the HTTP API
/// puts after `call tool "<tool>" on "<server>": `).
public struct MCPError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The server could not be started.
        case start
        /// No answer within the operation's timeout.
        case timeout
        /// The session is over: the server exited, closed its output, or broke the protocol.
        case closed
        /// The server answered something that is not what the method returns.
        case invalidResponse
        /// The server answered with a JSON-RPC error.
        case remote(code: Int)
        /// The caller's task was cancelled.
        case cancelled
        /// The session refused the request (input not read, not initialized).
        case unavailable
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}
