import Synchronization

/// What the agent socket asks of the MCP engine for `exp chat context tools` and
/// `exp chat context restart`: the seam between the two capabilities, which do not import
/// each other. The answers are the engine's HTTP bodies (JSON), so both doors read alike.
public protocol MCPServerControl: AnyObject, Sendable {
    /// `GET /api/v0/mcp/servers?tools=true`'s body: every server with its tools (bounded).
    func serversWithToolsJSON() -> [UInt8]
    /// Restarts server `name` (stopped, connected again now, listed anew); its row as
    /// `POST /api/v0/mcp/servers/{name}/restart` answers it.
    func restartServerJSON(_ name: String) async throws(MCPControlFailure) -> [UInt8]
}

/// Why an ``MCPServerControl`` call failed, in words for people.
public struct MCPControlFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// The engine's control, once it attached itself; held weakly (the engine owns the catalog).
final class MCPControlSlot: Sendable {
    private struct Weak { weak var control: (any MCPServerControl)? }
    private let slot = Mutex(Weak())
    var control: (any MCPServerControl)? { slot.withLock { $0.control } }
    func set(_ control: any MCPServerControl) { slot.withLock { $0.control = control } }
}
