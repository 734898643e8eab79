import Hummingbird

/// A request body decoded the way the reference's Go handlers decode it.
///
/// Typed accessors produce Go's wording for type mismatches, e.g.
/// `json: cannot unmarshal number into Go struct field StartRequest.command of type string`.
public struct JSONRequest: Sendable {
    /// The Go struct name used in error details.
    public let typeName: String
    private let members: [(String, JSONValue)]

    /// Reads the body (up to ``AgentHTTPLimits/maxRequestBody``) and parses its first JSON value.
    ///
    /// Throws 400 `Request body must be valid JSON.` for empty, malformed or non-object
    /// bodies, and 413 for oversized ones. A body of `null` is an empty object.
    public static func decode(_ request: Request, context: AgentRequestContext, typeName: String) async throws -> JSONRequest {
        var request = request
        // Oversized bodies throw here; JSONErrorMiddleware turns that into 413.
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

    /// Go matching: an exact key wins, else the last case-insensitive match.
    private func lookup(_ key: String) -> JSONValue? {
        if let exact = members.last(where: { $0.0 == key }) { return exact.1 }
        let folded = key.lowercased()
        return members.last(where: { $0.0.lowercased() == folded })?.1
    }

    private func mismatch(_ key: String, _ value: JSONValue, _ goType: String) -> APIError {
        APIError(
            .badRequest, "Request body must be valid JSON.",
            detail: "json: cannot unmarshal \(value.goKind) into Go struct field \(typeName).\(key) of type \(goType)")
    }

    /// A string field; nil when absent or null.
    public func string(_ key: String) throws(APIError) -> String? {
        switch lookup(key) {
        case nil, .null?: return nil
        case .string(let s)?: return s
        case let other?: throw mismatch(key, other, "string")
        }
    }

    /// A boolean field; nil when absent or null.
    public func bool(_ key: String) throws(APIError) -> Bool? {
        switch lookup(key) {
        case nil, .null?: return nil
        case .bool(let b)?: return b
        case let other?: throw mismatch(key, other, "bool")
        }
    }

    /// A `map[string]string` field; nil when absent or null. Null values become "".
    public func stringMap(_ key: String) throws(APIError) -> [String: String]? {
        switch lookup(key) {
        case nil, .null?: return nil
        case .object(let members)?:
            var map: [String: String] = [:]
            for (k, v) in members {
                switch v {
                case .string(let s): map[k] = s
                case .null: map[k] = map[k] ?? ""
                default: throw mismatch("\(key)", v, "string")
                }
            }
            return map
        case let other?: throw mismatch(key, other, "map[string]string")
        }
    }
}
