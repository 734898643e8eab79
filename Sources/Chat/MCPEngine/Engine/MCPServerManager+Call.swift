import AgentCore
import Metrics
import Synchronization

/// Why a tool call through the agent failed, with the reference's texts.
public enum MCPCallFailure: Error, Sendable, Equatable {
    /// `tool_name` is not `<server>__<tool>` (400).
    case invalidName(String)
    /// No server of that name is declared (404).
    case unknownServer(String)
    /// A declared server that has not had a session yet: still connecting, or its connects
    /// failed (404, as the reference answers: it keeps only servers that connected). The
    /// detail is the reference's, then why (secrets redacted).
    case neverConnected(server: String, why: String)
    /// Every call slot of the agent is taken (503).
    case busy(Int)
    /// Every call slot of that server is taken (503, as ``busy(_:)``: try again later).
    case serverBusy(server: String, limit: Int)
    /// Anything else: a server whose session ended (until it is back), transport, timeout,
    /// JSON-RPC error (502); the text is `call tool "<tool>" on "<server>": <why>`.
    case failed(String)

    public var detail: String {
        switch self {
        case .invalidName(let name): "invalid tool name format: expected format \"server__tool\", got \(goQuote(name))"
        case .unknownServer(let server): "unknown MCP server: \(goQuote(server))"
        case .neverConnected(let server, let why): "unknown MCP server: \(goQuote(server)) (declared, not connected: \(why))"
        case .busy(let limit): "\(limit) MCP tool calls are in flight; try again later"
        case .serverBusy(let server, let limit): "MCP server \(goQuote(server)) has \(limit) calls in flight; try again later"
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
        enum Admission {
            case unknown, busy(Int), serverBusy, neverConnected(String), notConnected(String), admitted(MCPClientSession, ContextRedactor)
        }
        let limit = configuration.maxCallsInFlight
        let admission = state.withLock { s -> Admission in
            guard let server = s.servers[serverName] else { return .unknown }
            guard let session = server.session else {
                // The reference holds a server only once it connected, and keeps a session
                // that ended: a server that never had one is unknown to it (404), one whose
                // session ended fails the call (502).
                if server.running == nil { return .neverConnected(server.error.isEmpty ? "still connecting" : server.error) }
                return .notConnected(server.error.isEmpty ? "not connected" : server.error)
            }
            guard s.callsInFlight < limit else { return .busy(limit) }
            // The session's own cap, reserved here so that the session never refuses (its
            // refusal would be a 502); under the manager's lock, so admissions are ordered.
            guard Self.sessionSlots.reserve(session) else { return .serverBusy }
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
        case .serverBusy:
            metrics.call("busy")
            throw .serverBusy(server: serverName, limit: MCPLimits.maxConcurrentCalls)
        case .neverConnected(let why):
            metrics.call("unknown_server")
            throw .neverConnected(server: serverName, why: why)
        case .notConnected(let why):
            metrics.call("failed")
            throw .failed(prefix + "server \(goQuote(serverName)) is not connected: \(why)")
        case .admitted(let session, let redactor):
            defer {
                Self.sessionSlots.release(session)
                state.withLock { $0.callsInFlight -= 1 }
            }
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
                throw .failed(redactor.scrub(prefix + error.message, server: serverName))
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

    /// The call slots taken on each session (``MCPLimits/maxConcurrentCalls`` each), shared
    /// by every manager of the process (a session belongs to one).
    static let sessionSlots = SessionSlots()
}

/// Calls admitted per session, counted before the session sees them, so that a call past a
/// server's cap is refused as busy (503) and not by the session (502).
///
/// Memory: one entry per session with a call admitted (at most the managers' call caps);
/// an entry goes when its count returns to zero, so an identifier is never reused while
/// counted (the caller holds the session for as long as its slot is taken).
final class SessionSlots: Sendable {
    private let counts = Mutex<[ObjectIdentifier: Int]>([:])

    /// Takes a slot on `session`; false when its ``MCPLimits/maxConcurrentCalls`` are taken.
    func reserve(_ session: MCPClientSession) -> Bool {
        counts.withLock { counts in
            let key = ObjectIdentifier(session)
            let taken = counts[key, default: 0]
            guard taken < MCPLimits.maxConcurrentCalls else { return false }
            counts[key] = taken + 1
            return true
        }
    }

    /// Gives back a slot taken with ``reserve(_:)``, after the session's call returned.
    func release(_ session: MCPClientSession) {
        counts.withLock { counts in
            let key = ObjectIdentifier(session)
            let taken = counts[key, default: 1] - 1
            counts[key] = taken > 0 ? taken : nil
        }
    }
}
