import AgentCore
import AgentProto
import DRPC
import SwiftProtobuf

/// Extensions (not in the reference): the MCP engine's servers with their tools, and a
/// server's restart, for `exp chat context tools` and `exp chat context restart`. Requests
/// and answers are `google.protobuf.StringValue`: the server's name in, the engine's JSON
/// body (as its HTTP routes answer) out. An agent without them answers Unimplemented.
extension AgentSocketService {
    public static let mcpServersMethod = DRPCMethodPath.agentSocket("MCPServers")
    public static let restartMCPServerMethod = DRPCMethodPath.agentSocket("RestartMCPServer")
    static let mcpUnavailable = "MCP engine not available"
    /// A server name longer than this is refused before it is looked up (names are at
    /// most 1024 bytes in the snapshot).
    static let maxMCPServerNameBytes = 1024

    func registerMCP(on server: inout CountingServer) {
        server.register(Self.mcpServersMethod) { _ in
            var answer = Google_Protobuf_StringValue()
            answer.value = String(decoding: try self.mcpControl().serversWithToolsJSON(), as: UTF8.self)
            return try answer.serializedBytes()
        }
        server.register(Self.restartMCPServerMethod) { bytes in
            let request = try Google_Protobuf_StringValue(serializedBytes: bytes)
            let name = request.value
            guard name.utf8.count <= Self.maxMCPServerNameBytes else {
                throw SocketError("restart MCP server: a name of \(name.utf8.count) bytes is longer than \(Self.maxMCPServerNameBytes) bytes")
            }
            let control = try self.mcpControl()
            var answer = Google_Protobuf_StringValue()
            do throws(MCPControlFailure) {
                answer.value = String(decoding: try await control.restartServerJSON(name), as: UTF8.self)
            } catch {
                throw SocketError(error.description)
            }
            return try answer.serializedBytes()
        }
    }

    func mcpControl() throws(SocketError) -> any MCPServerControl {
        guard let control = mcpCatalog?.control else { throw SocketError(Self.mcpUnavailable) }
        return control
    }
}
