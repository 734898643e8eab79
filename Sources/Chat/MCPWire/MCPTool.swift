import AgentCore

/// A tool as a server lists it: AgentCore's ``ContextTool`` (name, description, input
/// schema), the shape the catalog publishes; `MCPClientSession.listTools()` returns it within
/// `MCPToolBudget`'s bounds (schema reduced, description cut).
public typealias MCPTool = ContextTool

/// One item of a tool result as the agent's API returns it: `type` is `text`, `image`,
/// `audio` or `resource`.
public struct MCPContentItem: Sendable, Equatable {
    public var type: String
    public var text: String?
    /// Base64, for images and audio.
    public var data: String?
    public var mediaType: String?

    public init(type: String, text: String? = nil, data: String? = nil, mediaType: String? = nil) {
        self.type = type
        self.text = text
        self.data = data
        self.mediaType = mediaType
    }

    /// The JSON around an item's strings in the agent's answer, at most:
    /// `{"data":"","media_type":"","text":"","type":""}` and the comma after it.
    public static let framingBytes = 48

    /// What the item adds to the agent's answer: the UTF-8 of its strings and
    /// ``framingBytes``. Escapes are not counted: each one the answer writes was at least as
    /// long in the server's message.
    public var mappedBytes: Int {
        type.utf8.count + (text?.utf8.count ?? 0) + (data?.utf8.count ?? 0) + (mediaType?.utf8.count ?? 0) + Self.framingBytes
    }
}

/// A `tools/call` result: its content mapped for the agent's API, and `isError` (a tool that
/// failed, which is still an answer).
public struct MCPToolResult: Sendable, Equatable {
    public var content: [MCPContentItem]
    public var isError: Bool

    public init(content: [MCPContentItem], isError: Bool) {
        self.content = content
        self.isError = isError
    }

    /// Maps a `CallToolResult`: text as is; image and audio as base64 data with their MIME
    /// type; an embedded resource and a resource link as a `resource` item naming its URI;
    /// anything else as a text item naming the unsupported type. `structuredContent` is not
    /// carried. A result of more than ``MCPLimits/maxResultItems`` items, or whose items
    /// map to more than ``MCPLimits/maxResultBytes``, is refused (nothing mapped is kept
    /// beyond the bound).
    public init(mapping result: JSONValue) throws(MCPError) {
        guard case .object = result else { throw MCPError(.invalidResponse, "tools/call result is not an object") }
        isError = result["isError"] == .bool(true)
        content = []
        switch result["content"] {
        case nil, .null?: break
        case .array(let items)?:
            guard items.count <= MCPLimits.maxResultItems else {
                throw MCPError(.invalidResponse, "tools/call result has \(items.count) content items, more than the \(MCPLimits.maxResultItems) passed on")
            }
            content.reserveCapacity(items.count)
            var bytes = 0
            for item in items {
                let mapped = Self.map(item)
                bytes += mapped.mappedBytes
                guard bytes <= MCPLimits.maxResultBytes else {
                    throw MCPError(.invalidResponse, "tools/call result's content maps to more than the \(MCPLimits.maxResultBytes) bytes passed on")
                }
                content.append(mapped)
            }
        default: throw MCPError(.invalidResponse, "tools/call result's content is not an array")
        }
    }

    static func map(_ item: JSONValue) -> MCPContentItem {
        let type = item["type"]?.stringValue ?? ""
        switch type {
        case "text":
            return MCPContentItem(type: "text", text: item["text"]?.stringValue ?? "")
        case "image", "audio":
            return MCPContentItem(type: type, data: item["data"]?.stringValue ?? "", mediaType: item["mimeType"]?.stringValue ?? "")
        case "resource":
            let uri = item["resource"]?["uri"]?.stringValue ?? ""
            return MCPContentItem(type: "resource", text: "[embedded resource: \(uri)]")
        case "resource_link":
            return MCPContentItem(type: "resource", text: "[resource link: \(item["uri"]?.stringValue ?? "")]")
        default:
            return MCPContentItem(type: "text", text: "[unsupported content type: \(goQuote(type))]")
        }
    }
}
