import SwiftProtobuf

/// The MCP extensions (what `exp chat context tools|restart` use): JSON bodies as the
/// engine's HTTP routes answer them.
extension AgentSocketClient {
    /// `{"servers":[…]}` with each server's tools.
    public func mcpServersJSON() async throws(Failure) -> String {
        try await unary("MCPServers", Google_Protobuf_StringValue(), as: Google_Protobuf_StringValue.self).value
    }

    /// Restarts server `name`; its row once connected again.
    public func restartMCPServer(_ name: String) async throws(Failure) -> String {
        var request = Google_Protobuf_StringValue()
        request.value = name
        return try await unary("RestartMCPServer", request, as: Google_Protobuf_StringValue.self).value
    }
}
