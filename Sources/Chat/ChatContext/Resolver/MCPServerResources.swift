import AgentCore

/// The MCP engine's catalog as `mcp_server` resources: one `ok` resource per connected server
/// with at least one tool (its tools sorted by name), one `unreadable` resource per server
/// that is not connected (its error), and none for a connected server without tools.
enum MCPServerResources {
    static func make(_ entries: [MCPCatalogEntry]) -> [ContextResource] {
        entries.compactMap { entry in
            if entry.connected {
                guard !entry.tools.isEmpty else { return nil }
                let tools = entry.tools.sorted { bytewisePrecedes($0.name, $1.name) }
                return ContextResource(
                    kind: .mcpServer, source: entry.name, contentHash: hash(entry.name, tools), status: .ok,
                    name: entry.name, tools: tools)
            }
            var sha = SHA256()
            for field in ["unreadable", entry.name, entry.error] { netstring(field, into: &sha) }
            return ContextResource(
                kind: .mcpServer, source: entry.name, contentHash: sha.finalize(), status: .unreadable, error: entry.error,
                name: entry.name)
        }
    }

    /// sha256 over netstrings of the server's name and, per tool, its name, description and
    /// schema as JSON.
    static func hash(_ name: String, _ tools: [ContextTool]) -> [UInt8] {
        var sha = SHA256()
        netstring(name, into: &sha)
        for tool in tools {
            netstring(tool.name, into: &sha)
            netstring(tool.description, into: &sha)
            netstring(tool.inputSchema?.encoded ?? Array("null".utf8), into: &sha)
        }
        return sha.finalize()
    }

    private static func netstring(_ text: String, into sha: inout SHA256) {
        netstring(Array(text.utf8), into: &sha)
    }

    private static func netstring(_ bytes: [UInt8], into sha: inout SHA256) {
        sha.update(Array(String(bytes.count).utf8))
        sha.update([UInt8(ascii: ":")])
        sha.update(bytes)
    }
}
