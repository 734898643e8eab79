import AgentCore
import Metrics
import Synchronization

/// Why a tool call through the agent failed, with the reference's texts.
public enum MCPCallFailure: Error, Sendable, Equatable {
    /// `tool_name` is not `<server>__<tool>` (400).
    case invalidName(String)
    /// No server of that name is declared (404).
    case unknownServer(String)
    /// Every call slot of the agent is taken (503).
    case busy(Int)
    /// Anything else: not connected, transport, timeout, JSON-RPC error (502); the text is
    /// `call tool "<tool>" on "<server>": <why>`.
    case failed(String)

    public var detail: String {
        switch self {
        case .invalidName(let name): "invalid tool name format: expected format \"server__tool\", got \(goQuote(name))"
        case .unknownServer(let server): "unknown MCP server: \(goQuote(server))"
        case .busy(let limit): "\(limit) MCP tool calls are in flight; try again later"
        case .failed(let text): text
        }
    }
}

extension MCPServerManager {
    /// Calls `<server>__<tool>` (split at the first `__`; the tool part may contain more)
    /// with `arguments` (an object, or nil). A result with `isError` is a result. Cancelling
    /// the calling task cancels the call on the server.
    public func callTool(_ toolName: String, arguments: JSONValue?) async throws(MCPCallFailure) -> MCPToolResult {
        guard let (serverName, tool) = Self.splitToolName(toolName) else {
            metrics.call("invalid_name")
            throw .invalidName(toolName)
        }
        enum Admission { case unknown, busy(Int), notConnected(String), admitted(MCPClientSession, ContextRedactor) }
        let limit = configuration.maxCallsInFlight
        let admission = state.withLock { s -> Admission in
            guard let server = s.servers[serverName] else { return .unknown }
            guard let session = server.session else {
                return .notConnected(server.error.isEmpty ? "not connected" : server.error)
            }
            guard s.callsInFlight < limit else { return .busy(limit) }
            s.callsInFlight += 1
            return .admitted(session, s.redactor)
        }
        let prefix = "call tool \(goQuote(tool)) on \(goQuote(serverName)): "
        switch admission {
        case .unknown:
            metrics.call("unknown_server")
            throw .unknownServer(serverName)
        case .busy(let limit):
            metrics.call("busy")
            throw .busy(limit)
        case .notConnected(let why):
            metrics.call("failed")
            throw .failed(prefix + "server \(goQuote(serverName)) is not connected: \(why)")
        case .admitted(let session, let redactor):
            defer { state.withLock { $0.callsInFlight -= 1 } }
            let started = ContinuousClock.now
            defer { metrics.recordCall(since: started) }
            do throws(MCPError) {
                let result = try await session.callTool(tool, arguments: arguments)
                metrics.call(result.isError ? "tool_error" : "ok")
                return result
            } catch {
                switch error.kind {
                case .timeout: metrics.call("timeout")
                case .cancelled: metrics.call("cancelled")
                default: metrics.call("failed")
                }
                throw .failed(redactor.scrub(prefix + error.message))
            }
        }
    }

    /// `<server>__<tool>` split at the first `__`; nil unless both halves are non-empty.
    static func splitToolName(_ name: String) -> (server: String, tool: String)? {
        let bytes = Array(name.utf8)
        guard bytes.count >= 2 else { return nil }
        for index in 0..<(bytes.count - 1) where bytes[index] == UInt8(ascii: "_") && bytes[index + 1] == UInt8(ascii: "_") {
            guard index > 0, index + 2 < bytes.count else { return nil }
            return (String(decoding: bytes[..<index], as: UTF8.self), String(decoding: bytes[(index + 2)...], as: UTF8.self))
        }
        return nil
    }

    /// Calls in flight across every server.
    public var callsInFlight: Int { state.withLock { $0.callsInFlight } }
}
