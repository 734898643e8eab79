import AgentCore
import Hummingbird

/// A request body decoded the way the reference's Go handlers decode it.
///
/// Typed accessors produce Go's wording for type mismatches, e.g.
/// `json: cannot unmarshal number into Go struct field StartRequest.command of type string`.
public struct JSONRequest: Sendable {
    /// The Go struct name used in error details.
    public let typeName: String
    /// Where this object sits in the body (`pty`, `files[0]`); empty for the body itself.
    /// Error details name a field by its whole path from the body (`pty.rows`).
    public let path: String
    private let members: [(String, JSONValue)]

    private init(typeName: String, path: String = "", members: [(String, JSONValue)]) {
        self.typeName = typeName
        self.path = path
        self.members = members
    }

    /// `key` as a path from the body: `pty.rows` inside `pty`, `rows` at the top.
    public func fieldPath(_ key: String) -> String {
        path.isEmpty ? key : "\(path).\(key)"
    }

    /// Reads the body (up to ``AgentHTTPLimits/maxRequestBody``) and parses its first JSON value.
    ///
    /// Throws 400 `Request body must be valid JSON.` for empty, malformed or non-object
    /// bodies, and 413 for oversized ones. A body of `null` is an empty object.
    public static func decode(_ request: Request, context: AgentRequestContext, typeName: String) async throws -> JSONRequest {
        var request = request
        // Oversized bodies throw here; AgentResponder turns that into 413.
        let buffer = try await request.collectBody(upTo: context.maxUploadSize)
        return try parse(buffer.readableBytesView, typeName: typeName)
    }

    /// Parses `bytes` as a request of Go type `typeName`.
    public static func parse(_ bytes: some Collection<UInt8>, typeName: String) throws(APIError) -> JSONRequest {
        let value: JSONValue
        do {
            value = try JSONValue.parseFirst(bytes)
        } catch {
            throw APIError(.badRequest, "Request body must be valid JSON.", detail: error.description)
        }
        switch value {
        case .null: return JSONRequest(typeName: typeName, members: [])
        case .object(let members): return JSONRequest(typeName: typeName, members: members)
        default:
            throw APIError(
                .badRequest, "Request body must be valid JSON.",
                detail: "json: cannot unmarshal \(value.goKind) into Go value of type \(typeName)")
        }
    }

    /// The values of every member that Go's decoder would store into field `key`, in
    /// document order: keys match exactly or case-insensitively (Go's fold, which also
    /// maps `ſ` to `S` and the Kelvin sign to `K`), and each later match overwrites
    /// the earlier ones, so `{"command":"a","Command":"b"}` decodes as `b`.
    private func matches(_ key: String) -> [JSONValue] {
        let folded = Self.goFold(key)
        return members.compactMap { $0.0 == key || Self.goFold($0.0) == folded ? $0.1 : nil }
    }

    /// Go's `foldName` restricted to what can equal an ASCII field name.
    static func goFold(_ name: String) -> String { goFoldName(name) }

    /// Go's answer when field `key` holds `value` where `goType` belongs (400
    /// `Request body must be valid JSON.`, the detail naming the field), for nested shapes
    /// a route reads through ``value(_:)``.
    public func mismatch(_ key: String, _ value: JSONValue, _ goType: String) -> APIError {
        APIError(
            .badRequest, "Request body must be valid JSON.",
            detail: "json: cannot unmarshal \(value.goKind) into Go struct field \(typeName).\(fieldPath(key)) of type \(goType)")
    }

    /// A string field; nil when absent or null.
    public func string(_ key: String) throws(APIError) -> String? {
        var result: String?
        for value in matches(key) {
            switch value {
            case .null: continue  // Go: null leaves a string unchanged
            case .string(let s): result = s
            default: throw mismatch(key, value, "string")
            }
        }
        return result
    }

    /// An `int` field; nil when absent or null. As Go: integer syntax only, within `Int`
    /// (`1e3`, `1.0` or `1e30` are refused with the number in the detail).
    public func int(_ key: String) throws(APIError) -> Int? {
        var result: Int?
        for value in matches(key) {
            switch value {
            case .null: continue
            default: result = try integer(key, value)
            }
        }
        return result
    }

    /// An `[]int` (or `[N]int`) field; nil when absent or null. A null entry decodes as 0.
    public func intArray(_ key: String) throws(APIError) -> [Int]? {
        var result: [Int]?
        for value in matches(key) {
            switch value {
            case .null: result = nil
            case .array(let items):
                var numbers: [Int] = []
                for item in items { numbers.append(item == .null ? 0 : try integer(key, item)) }
                result = numbers
            default: throw mismatch(key, value, "[]int")
            }
        }
        return result
    }

    private func integer(_ key: String, _ value: JSONValue) throws(APIError) -> Int {
        guard case .number(let text) = value else { throw mismatch(key, value, "int") }
        guard let number = Int(text) else {
            throw APIError(
                .badRequest, "Request body must be valid JSON.",
                detail: "json: cannot unmarshal number \(text) into Go struct field \(typeName).\(fieldPath(key)) of type int")
        }
        return number
    }

    /// A boolean field; nil when absent or null.
    public func bool(_ key: String) throws(APIError) -> Bool? {
        var result: Bool?
        for value in matches(key) {
            switch value {
            case .null: continue
            case .bool(let b): result = b
            default: throw mismatch(key, value, "bool")
            }
        }
        return result
    }

    /// A `map[string]string` field; nil when absent or null. As in Go, repeated keys merge
    /// into one map (a later entry wins), a null entry value stores "", and a null map
    /// resets it.
    public func stringMap(_ key: String) throws(APIError) -> [String: String]? {
        var result: [String: String]?
        for value in matches(key) {
            switch value {
            case .null: result = nil
            case .object(let members):
                // Taken out of `result` while it grows: a copy per repeated key would make a
                // body of many repeats quadratic.
                var map = result.take() ?? [:]
                for (k, v) in members {
                    switch v {
                    case .string(let s): map[k] = s
                    case .null: map[k] = ""
                    default: throw mismatch(key, v, "string")
                    }
                }
                result = map
            default: throw mismatch(key, value, "map[string]string")
            }
        }
        return result
    }

    /// A `[]string` field; nil when absent or null. A null entry decodes as "", as in Go.
    public func stringArray(_ key: String) throws(APIError) -> [String]? {
        var result: [String]?
        for value in matches(key) {
            switch value {
            case .null: result = nil
            case .array(let items):
                var strings: [String] = []
                for item in items {
                    switch item {
                    case .string(let s): strings.append(s)
                    case .null: strings.append("")
                    default: throw mismatch(key, item, "string")
                    }
                }
                result = strings
            default: throw mismatch(key, value, "[]string")
            }
        }
        return result
    }

    /// The raw value Go would decode into field `key` (the last match), for nested shapes.
    public func value(_ key: String) -> JSONValue? {
        matches(key).last
    }

    /// A request of type `typeName` made of a nested object (a member of another request);
    /// anything else decodes as an empty object and the accessors find nothing. Its errors
    /// name fields from where this request sits (prefer ``with(_:at:)``, which names them
    /// from the body).
    public func with(_ value: JSONValue) -> JSONRequest {
        if case .object(let members) = value { return JSONRequest(typeName: typeName, path: path, members: members) }
        return JSONRequest(typeName: typeName, path: path, members: [])
    }

    /// The nested object `value` found at `key` (a member name, or `files[2]` for an array's
    /// item): its errors name fields by their whole JSON path (`pty.rows`), as Go's do.
    public func with(_ value: JSONValue, at key: String) -> JSONRequest {
        let nested = key.hasPrefix("[") ? path + key : fieldPath(key)
        if case .object(let members) = value { return JSONRequest(typeName: typeName, path: nested, members: members) }
        return JSONRequest(typeName: typeName, path: nested, members: [])
    }
}
