import AgentCore
import AgentHTTP
import Hummingbird

/// The MCP routes under `/api/v0/mcp`: `POST /call-tool` with the reference's shapes,
/// statuses and texts; beyond the reference, `GET /servers` (the engine's view of each
/// declared server, `?tools=true` with its tools) and `POST /servers/{name}/restart`.
struct MCPRoutes: Sendable {
    let manager: MCPServerManager

    /// A call and a restart on the pool (they wait on a server); the servers' list, from
    /// memory under the manager's lock, on the loop unless its tools are asked for.
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
        routes.get("servers") { request, _ in
            let raw = GoQuery(request).get("tools")
            guard let withTools = Self.parseBool(raw) else {
                throw APIError(.badRequest, "Invalid query parameter.", detail: "tools must be true or false, got \(goQuote(raw ?? ""))")
            }
            return JSONResponse.make(MCPServersJSON(manager.servers, tools: withTools ? manager.serverTools : nil))
        }
        routes.post("servers/:name/restart") { _, context in
            let raw = context.parameters.get("name") ?? ""
            let name = raw.contains("%") ? raw.percentDecoded() ?? raw : raw
            let task = Task { () -> Result<MCPServerStatus, MCPRestartFailure> in
                do throws(MCPRestartFailure) {
                    return .success(try await manager.restart(name))
                } catch {
                    return .failure(error)
                }
            }
            switch await task.value {
            case .success(let status):
                return JSONResponse.make(MCPServersJSON.Server(status, tools: manager.serverTools))
            case .failure(let failure):
                switch failure {
                case .unknownServer: throw APIError(.notFound, "MCP server not found.", detail: failure.detail)
                case .closed: throw APIError(.serviceUnavailable, "Could not restart MCP server.", detail: failure.detail)
                case .failed: throw APIError(.badGateway, "Could not restart MCP server.", detail: failure.detail)
                }
            }
        }
    }

    /// Go's `strconv.ParseBool` over a query value; absent or empty is false, nil is invalid.
    static func parseBool(_ raw: String?) -> Bool? {
        switch raw ?? "" {
        case "", "0", "f", "F", "false", "FALSE", "False": false
        case "1", "t", "T", "true", "TRUE", "True": true
        default: nil
        }
    }

    static func apiError(_ failure: MCPCallFailure) -> APIError {
        switch failure {
        case .invalidName: return APIError(.badRequest, "MCP tool call failed.", detail: failure.detail)
        case .unknownServer, .neverConnected: return APIError(.notFound, "MCP tool call failed.", detail: failure.detail)
        case .busy, .serverBusy:
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
        content =
            result.content.isEmpty
            ? nil
            : result.content.map { item in
                Item(
                    type: item.type, text: item.text.flatMap { $0.isEmpty ? nil : $0 },
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

/// `{"servers":[…]}` for `GET /api/v0/mcp/servers`; with tools, each server's `tools`
/// (name and description) within ``maxToolBytes`` for the whole answer.
struct MCPServersJSON: Encodable, Sendable {
    /// A tool's description is cut to this many bytes (at a character boundary, `…` added).
    static let maxDescriptionBytes = 512
    /// Tool names and descriptions in one answer at most (with 256 servers of 1024 tools
    /// the answer would otherwise reach hundreds of MiB); tools past it are left out and
    /// counted in their server's `tools_omitted`.
    static let maxToolBytes = 4 << 20

    struct Tool: Encodable, Sendable {
        var name: String
        var description: String
    }

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
        /// Absent when none (see ``MCPToolBudget``).
        var descriptionsCut: Int?
        var toolsLeftOut: Int?
        var tools: [Tool]?
        var toolsOmitted: Int?

        enum CodingKeys: String, CodingKey {
            case name, transport, state, lastError = "last_error", toolCount = "tool_count", restarts, pid
            case protocolVersion = "protocol_version", callsInFlight = "calls_in_flight"
            case descriptionsCut = "descriptions_cut", toolsLeftOut = "tools_left_out", tools, toolsOmitted = "tools_omitted"
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
            descriptionsCut = status.descriptionsCut > 0 ? status.descriptionsCut : nil
            toolsLeftOut = status.toolsLeftOut > 0 ? status.toolsLeftOut : nil
        }
    }

    var servers: [Server]

    /// The servers; with `tools`, each one's (none when not listed), within the bounds.
    init(_ statuses: [MCPServerStatus], tools: [String: [ContextTool]]?) {
        var budget = Self.maxToolBytes
        servers = statuses.map { status in
            var server = Server(status)
            guard let tools else { return server }
            let listed = tools[status.name] ?? []
            var kept: [Tool] = []
            for tool in listed {
                let description = Self.cut(tool.description, to: Self.maxDescriptionBytes)
                let size = tool.name.utf8.count + description.utf8.count
                guard size <= budget else { break }
                budget -= size
                kept.append(Tool(name: tool.name, description: description))
            }
            server.tools = kept
            if kept.count < listed.count { server.toolsOmitted = listed.count - kept.count }
            return server
        }
    }

    /// `text` cut to at most `limit` bytes at a character boundary, `…` appended when cut.
    static func cut(_ text: String, to limit: Int) -> String {
        guard text.utf8.count > limit else { return text }
        let ellipsis = "…"
        var end = text.utf8.index(text.utf8.startIndex, offsetBy: limit - ellipsis.utf8.count)
        // Back to the first byte of a character (a UTF-8 continuation byte is 0b10xxxxxx).
        while end > text.utf8.startIndex, text.utf8[end] & 0xC0 == 0x80 { end = text.utf8.index(before: end) }
        return String(decoding: text.utf8[..<end], as: UTF8.self) + ellipsis
    }
}

extension MCPServersJSON.Server {
    /// One server's row with its tools (the restart's answer).
    init(_ status: MCPServerStatus, tools: [String: [ContextTool]]) {
        self = MCPServersJSON([status], tools: tools).servers[0]
    }
}
