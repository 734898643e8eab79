import AgentCore
import AgentProto
import FoundationEssentials
import SwiftProtobuf

/// A snapshot as a `PushContextStateRequest` that coderd accepts: every value is checked
/// against coderd's limits before it is sent, so one bad file can never make the control
/// plane reject every push. Diagnostics are redacted and cut to 4096 bytes, server names to
/// 1024 bytes; a resource whose source is empty, over 1024 bytes or not unique is left out;
/// at most 1000 resources; a body over 256 KiB, or one past 4 MiB of bodies in all, is
/// replaced by an empty body of its kind with status `excluded`. What was left out or
/// excluded is said in `snapshot_error` when that is empty.
public enum ContextPushRequest {
    /// coderd's caps on one push.
    public enum Limits {
        public static let resources = 1000
        public static let bodyBytes = 256 * 1024
        public static let aggregateBodyBytes = 4 * 1024 * 1024
        public static let sourceBytes = 1024
        public static let nameBytes = 1024
        public static let errorBytes = 4096
    }

    public static func make(_ snapshot: ContextSnapshot, initial: Bool, redactor: ContextRedactor) -> Coder_Agent_V2_PushContextStateRequest {
        var request = Coder_Agent_V2_PushContextStateRequest()
        request.version = min(snapshot.version, UInt64(Int64.max))
        request.aggregateHash = Data(snapshot.aggregateHash)
        request.initial = initial
        var problems: [String] = []
        var sources = Set<String>()
        var total = 0
        for resource in snapshot.resources {
            let bytes = resource.source.utf8.count
            guard bytes > 0, bytes <= Limits.sourceBytes else {
                problems.append("a resource with a \(bytes)-byte source was left out (the control plane takes 1 to \(Limits.sourceBytes))")
                continue
            }
            guard sources.insert(resource.source).inserted else {
                problems.append("a second resource with source \(goQuote(resource.source)) was left out")
                continue
            }
            guard request.resources.count < Limits.resources else {
                problems.append("snapshot lists \(Limits.resources) of \(snapshot.resources.count) resources")
                break
            }
            var message = wire(resource, redactor: redactor)
            let size = bodyJSONBytes(message)
            if size > Limits.bodyBytes || total + size > Limits.aggregateBodyBytes {
                let reason =
                    size > Limits.bodyBytes
                    ? "body of \(size) bytes exceeds the control plane's \(Limits.bodyBytes)-byte cap"
                    : "dropped to fit the control plane's \(Limits.aggregateBodyBytes)-byte total"
                message = excluded(message, reason: reason)
                problems.append(reason)
            }
            total += bodyJSONBytes(message)
            request.resources.append(message)
        }
        let error = snapshot.snapshotError.isEmpty ? (problems.first ?? "") : snapshot.snapshotError
        request.snapshotError = redactor.scrub(error)
        return request
    }

    static func wire(_ resource: ContextResource, redactor: ContextRedactor) -> Coder_Agent_V2_ContextResource {
        var out = Coder_Agent_V2_ContextResource()
        out.source = resource.source
        if let path = resource.sourcePath, !path.isEmpty, path.utf8.count <= Limits.sourceBytes { out.sourcePath = path }
        out.contentHash = Data(resource.contentHash.prefix(64))
        out.sizeBytes = min(resource.sizeBytes, UInt64(Int64.max))
        out.status = status(resource.status)
        // An MCP server's row is scrubbed with its own entry's secrets only (see ContextRedactor).
        out.error = resource.kind == .mcpServer ? redactor.scrub(resource.error, server: resource.name) : redactor.scrub(resource.error)
        let ok = resource.status == .ok
        switch resource.kind {
        case .instructionFile:
            var body = Coder_Agent_V2_InstructionFileBody()
            if ok { body.content = Data(resource.payload) }
            out.instructionFile = body
        case .skill:
            var body = Coder_Agent_V2_SkillMetaBody()
            if ok { body.meta = Data(resource.payload) }
            body.name = ContextRedactor.cut(resource.name, bytes: Limits.nameBytes, suffix: "")
            body.description_p = resource.description
            out.skill = body
        case .mcpConfig:
            out.mcpConfig = Coder_Agent_V2_MCPConfigBody()
        case .mcpServer:
            var body = Coder_Agent_V2_MCPServerBody()
            body.serverName = ContextRedactor.cut(resource.name.isEmpty ? resource.source : resource.name, bytes: Limits.nameBytes, suffix: "")
            body.tools = resource.tools.sorted { bytewisePrecedes($0.name, $1.name) }.map { tool in
                var wire = Coder_Agent_V2_MCPTool()
                wire.name = tool.name
                wire.description_p = tool.description
                if case .object(let members)? = tool.inputSchema { wire.inputSchema = protoStruct(members) }
                return wire
            }
            out.mcpServer = body
        }
        return out
    }

    /// The same resource with an empty body of its kind, `excluded`, and `reason`.
    static func excluded(_ resource: Coder_Agent_V2_ContextResource, reason: String) -> Coder_Agent_V2_ContextResource {
        var out = resource
        out.status = .excluded
        out.error = reason
        switch resource.body {
        case .instructionFile: out.instructionFile = Coder_Agent_V2_InstructionFileBody()
        case .skill(let skill):
            var body = Coder_Agent_V2_SkillMetaBody()
            body.name = skill.name
            out.skill = body
        case .mcpServer(let server):
            var body = Coder_Agent_V2_MCPServerBody()
            body.serverName = server.serverName
            out.mcpServer = body
        case .mcpConfig, nil: out.mcpConfig = Coder_Agent_V2_MCPConfigBody()
        }
        return out
    }

    /// The body's size as coderd measures it (protojson with the proto's field names).
    static func bodyJSONBytes(_ resource: Coder_Agent_V2_ContextResource) -> Int {
        func size(_ body: some SwiftProtobuf.Message) -> Int {
            var options = JSONEncodingOptions()
            options.preserveProtoFieldNames = true
            return ((try? body.jsonUTF8Bytes(options: options)) as [UInt8]?)?.count ?? Int.max / 4
        }
        switch resource.body {
        case .instructionFile(let body): return size(body)
        case .skill(let body): return size(body)
        case .mcpConfig(let body): return size(body)
        case .mcpServer(let body): return size(body)
        case nil: return 0
        }
    }

    static func status(_ status: ContextResourceStatus) -> Coder_Agent_V2_ContextResource.Status {
        switch status {
        case .ok: .ok
        case .oversize: .oversize
        case .unreadable: .unreadable
        case .invalid: .invalid
        case .excluded: .excluded
        }
    }

    static func protoStruct(_ members: [(String, JSONValue)]) -> Google_Protobuf_Struct {
        var out = Google_Protobuf_Struct()
        for (key, value) in members { out.fields[key] = protoValue(value) }
        return out
    }

    static func protoValue(_ value: JSONValue) -> Google_Protobuf_Value {
        switch value {
        case .null:
            var null = Google_Protobuf_Value()
            null.nullValue = .nullValue
            return null
        case .bool(let flag): return Google_Protobuf_Value(boolValue: flag)
        case .number(let text): return Google_Protobuf_Value(numberValue: Double(text) ?? 0)
        case .string(let text): return Google_Protobuf_Value(stringValue: text)
        case .array(let items): return Google_Protobuf_Value(listValue: Google_Protobuf_ListValue(values: items.map(protoValue)))
        case .object(let members): return Google_Protobuf_Value(structValue: protoStruct(members))
        }
    }
}
