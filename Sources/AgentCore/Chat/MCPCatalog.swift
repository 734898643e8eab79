import Synchronization

/// One declared MCP server as the MCP engine last saw it: what the chat context publishes as
/// an `mcp_server` resource.
public struct MCPCatalogEntry: Sendable, Equatable {
    /// The `.mcp.json` name.
    public var name: String
    /// Whether the server answered its last `tools/list`.
    public var connected: Bool
    /// Its tools, sorted by name, with their input schemas reduced (`type`, `properties`,
    /// `required`).
    public var tools: [ContextTool]
    /// Why it is not connected (secrets already redacted); empty when connected.
    public var error: String

    public init(name: String, connected: Bool, tools: [ContextTool] = [], error: String = "") {
        self.name = name
        self.connected = connected
        self.tools = tools
        self.error = error
    }
}

/// The MCP catalog the engine publishes and the context resolver reads: the seam between the
/// two capabilities, neither of which imports the other.
///
/// Memory: the latest entries (bounded by the engine's server and tool limits) and at most
/// ``maxSubscribers`` subscribers buffering one wake-up each.
public final class MCPCatalog: Sendable {
    /// Change subscribers at most; further ones finish at once.
    public static let maxSubscribers = 16

    private struct State {
        var entries: [MCPCatalogEntry] = []
    }

    private let state = Mutex(State())
    private let controlSlot = MCPControlSlot()
    private let changed = LatestValueBroadcast<Void>(maxSubscribers: MCPCatalog.maxSubscribers, replaysLatest: false)

    public init() {}

    /// The servers, sorted by name.
    public var entries: [MCPCatalogEntry] { state.withLock { $0.entries } }

    /// Replaces the catalog (sorted by name here); subscribers hear of it only when it
    /// differs from the current one.
    public func publish(_ entries: [MCPCatalogEntry]) {
        let sorted = entries.sorted { bytewisePrecedes($0.name, $1.name) }
        state.withLock { s in
            guard s.entries != sorted else { return }
            s.entries = sorted
            // Under the lock: wake-ups follow the order of the changes.
            changed.publish(())
        }
    }

    /// The engine's controls (tools, restart), once it attached them; nil without an engine.
    public var control: (any MCPServerControl)? { controlSlot.control }

    /// Called by the MCP engine once: the agent socket reaches it through the catalog.
    public func attach(_ control: any MCPServerControl) { controlSlot.set(control) }

    /// A wake-up after each change (coalesced: one buffered); cancelling the consumer
    /// unsubscribes.
    public func changes() -> AsyncStream<Void> { changed.subscribe() }
}
