import AgentCore
import AgentJSON

/// The engine behind the agent socket's MCP calls: the same bodies as its HTTP routes.
extension MCPServerManager: MCPServerControl {
    public func serversWithToolsJSON() -> [UInt8] {
        Self.json(MCPServersJSON(servers, tools: serverTools))
    }

    public func restartServerJSON(_ name: String) async throws(MCPControlFailure) -> [UInt8] {
        do throws(MCPRestartFailure) {
            return Self.json(MCPServersJSON.Server(try await restart(name), tools: serverTools))
        } catch {
            throw MCPControlFailure(error.detail)
        }
    }

    static func json(_ value: some Encodable) -> [UInt8] {
        (try? CompactJSONEncoder().encode(value)) ?? Array(#"{"message":"Failed to encode response."}"#.utf8)
    }
}
