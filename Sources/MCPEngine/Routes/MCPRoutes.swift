import AgentCore
import AgentHTTP
import Hummingbird

/// The MCP routes under `/api/v0/mcp`: `POST /call-tool` with the reference's shapes,
/// statuses and texts, and `GET /servers`, the engine's view of each declared server.
struct MCPRoutes: Sendable {
    let manager: MCPServerManager

    /// A call on the pool (it waits on a server); the servers' list, from memory under the
    /// manager's lock, on the loop.
    func add(to routes: inout AgentRoutes) {
        let manager = self.manager
        routes.post("call-tool") { request, context in
            let body = try await JSONRequest.decode(request, context: context, typeName: "workspacesdk.CallMCPToolRequest")
            let toolName = try body.string("tool_name") ?? ""
            let arguments: JSONValue?
            switch body.value("arguments") {
            case nil, .null?: arguments = nil
            case .object(let members)?: arguments = .object(members)
            case let other?: throw body.mismatch("arguments", other, "map[string]interface {}")
            }
            // The call runs in its own task so that the client going away cancels it (the
            // server hears `notifications/cancelled`).
            let call = Task { () -> Result<MCPToolResult, MCPCallFailure> in
                do throws(MCPCallFailure) {
                    return .success(try await manager.callTool(toolName, arguments: arguments))
                } catch {
                    return .failure(error)
                }
            }
            let registration = context.clientGone.whenGone { call.cancel() }
            defer { registration.cancel() }
            switch await call.value {
            case .success(let result): return JSONResponse.make(MCPCallToolJSON(result))
            case .failure(let failure): throw Self.apiError(failure)
            }
        }
        routes.get("servers", executor: .eventLoop) { _, _ in
            JSONResponse.make(MCPServersJSON(servers: manager.servers.map(MCPServersJSON.Server.init)))
        }
    }

    static func apiError(_ failure: MCPCallFailure) -> APIError {
        switch failure {
        case .invalidName: return APIError(.badRequest, "MCP tool call failed.", detail: failure.detail)
        case .unknownServer: return APIError(.notFound, "MCP tool call failed.", detail: failure.detail)
        case .busy:
            var error = APIError(.serviceUnavailable, "MCP tool call failed.", detail: failure.detail)
            error.headers[.retryAfter] = "1"
            return error
        case .failed: return APIError(.badGateway, "MCP tool call failed.", detail: failure.detail)
        }
    }
}

/// `{"content":[…],"is_error":bool}`; `content` is null when the result has none, as the
/// reference's (a Go slice without omitempty).
struct MCPCallToolJSON: Encodable, Sendable {
    struct Item: Encodable, Sendable {
        var type: String
        var text: String?
        var data: String?
        var mediaType: String?

        enum CodingKeys: String, CodingKey {
            case type, text, data, mediaType = "media_type"
        }
    }

    var content: [Item]?
    var isError: Bool

    enum CodingKeys: String, CodingKey {
        case content, isError = "is_error"
    }

    init(_ result: MCPToolResult) {
        content = result.content.isEmpty ? nil : result.content.map { item in
            Item(type: item.type, text: item.text.flatMap { $0.isEmpty ? nil : $0 },
                 data: item.data.flatMap { $0.isEmpty ? nil : $0 }, mediaType: item.mediaType.flatMap { $0.isEmpty ? nil : $0 })
        }
        isError = result.isError
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        if let content { try container.encode(content, forKey: .content) } else { try container.encodeNil(forKey: .content) }
        try container.encode(isError, forKey: .isError)
    }
}

/// `{"servers":[…]}` for `GET /api/v0/mcp/servers`.
struct MCPServersJSON: Encodable, Sendable {
    struct Server: Encodable, Sendable {
        var name: String
        var transport: String
        var state: String
        var lastError: String?
        var toolCount: Int
        var restarts: Int
        var pid: Int32?
        var protocolVersion: String?
        var callsInFlight: Int

        enum CodingKeys: String, CodingKey {
            case name, transport, state, lastError = "last_error", toolCount = "tool_count", restarts, pid
            case protocolVersion = "protocol_version", callsInFlight = "calls_in_flight"
        }

        init(_ status: MCPServerStatus) {
            name = status.name
            transport = status.transport
            state = status.state.rawValue
            lastError = status.lastError.isEmpty ? nil : status.lastError
            toolCount = status.toolCount
            restarts = status.restarts
            pid = status.pid
            protocolVersion = status.protocolVersion.flatMap { $0.isEmpty ? nil : $0 }
            callsInFlight = status.callsInFlight
        }
    }

    var servers: [Server]
}
