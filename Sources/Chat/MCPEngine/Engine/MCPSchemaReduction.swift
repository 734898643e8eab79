import AgentCore

/// Reduces a tool's input schema to what the chat passes to a model, as the reference's
/// `toolInputSchemaMap`: `type` (only a non-empty string), `properties` (an object, kept when
/// empty: some model APIs reject a missing one) and `required` (an array, only when not
/// empty); every other key (`$defs`, `additionalProperties`, …) is dropped. Nil when nothing
/// remains or the schema is not an object.
enum MCPSchemaReduction {
    /// A reduced schema larger than this (as compact JSON) drops its tool from the catalog:
    /// the whole server's resource must stay under the control plane's 256 KiB a body.
    static let maxSchemaBytes = 64 << 10

    static func reduce(_ schema: JSONValue?) -> JSONValue? {
        guard let schema, case .object = schema else { return nil }
        var members: [(String, JSONValue)] = []
        if case .string(let type)? = schema["type"], !type.isEmpty { members.append(("type", .string(type))) }
        if let properties = schema["properties"], case .object = properties { members.append(("properties", properties)) }
        if let required = schema["required"], case .array(let names) = required, !names.isEmpty {
            members.append(("required", required))
        }
        return members.isEmpty ? nil : .object(members)
    }
}
