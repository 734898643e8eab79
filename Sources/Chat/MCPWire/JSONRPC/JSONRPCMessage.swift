import AgentCore

/// A JSON-RPC 2.0 error object.
public struct JSONRPCError: Error, Sendable, Equatable {
    public var code: Int
    public var message: String
    public var data: JSONValue?

    public init(code: Int, message: String, data: JSONValue? = nil) {
        self.code = code
        self.message = message
        self.data = data
    }

    public static let methodNotFound = -32601
    public static let invalidParams = -32602
}

/// One JSON-RPC 2.0 message as MCP's stdio transport carries it: one JSON object a line
/// (batches are not part of MCP since 2025-06-18 and are refused).
public enum JSONRPCMessage: Sendable, Equatable {
    case request(id: JSONRPCID, method: String, params: JSONValue?)
    case notification(method: String, params: JSONValue?)
    case result(id: JSONRPCID, JSONValue)
    /// An error answer; the id is nil when the peer could not read the request's.
    case error(id: JSONRPCID?, JSONRPCError)

    /// Why a line is not a JSON-RPC message.
    public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        public var description: String
        init(_ description: String) { self.description = description }
    }

    /// The most of a line quoted back in an error.
    public static let maxExcerptBytes = 200

    /// `line` Go-quoted, cut to ``maxExcerptBytes`` (its length said when cut).
    static func excerpt(_ line: some Collection<UInt8>) -> String {
        let count = line.count
        let quoted = goQuote(String(decoding: line.prefix(maxExcerptBytes), as: UTF8.self))
        return count > maxExcerptBytes ? "\(quoted)… (\(count) bytes)" : quoted
    }

    /// Parses one line (without its newline).
    public static func parse(_ line: some Collection<UInt8>) throws(ParseError) -> JSONRPCMessage {
        let value: JSONValue
        // The line itself (its start) says more to a person than where a decoder stopped.
        do { value = try JSONValue.parseWhole(line) } catch { throw ParseError("not JSON: \(excerpt(line))") }
        guard case .object = value else {
            if case .array = value { throw ParseError("JSON-RPC batches are not supported") }
            throw ParseError("not a JSON object")
        }
        guard value["jsonrpc"] == .string("2.0") else { throw ParseError("missing \"jsonrpc\": \"2.0\"") }
        let params = value["params"]
        if let methodValue = value["method"] {
            guard let method = methodValue.stringValue else { throw ParseError("\"method\" is not a string") }
            if let idValue = value["id"], idValue != .null {
                guard let id = JSONRPCID(idValue) else { throw ParseError("\"id\" is not a string or an integer") }
                return .request(id: id, method: method, params: params)
            }
            return .notification(method: method, params: params)
        }
        let id: JSONRPCID?
        switch value["id"] {
        case nil, .null?: id = nil
        case let idValue?:
            guard let parsed = JSONRPCID(idValue) else { throw ParseError("\"id\" is not a string or an integer") }
            id = parsed
        }
        if let errorValue = value["error"] {
            guard case .object = errorValue, let code = errorValue["code"]?.intValue else {
                throw ParseError("\"error\" has no integer \"code\"")
            }
            let message = errorValue["message"]?.stringValue ?? ""
            return .error(id: id, JSONRPCError(code: code, message: message, data: errorValue["data"]))
        }
        guard let id else { throw ParseError("a response without an \"id\"") }
        guard let result = value["result"] else { throw ParseError("a response with neither \"result\" nor \"error\"") }
        return .result(id: id, result)
    }

    /// The message as one line, newline included.
    public func encodedLine() -> [UInt8] {
        var members: [(String, JSONValue)] = [("jsonrpc", .string("2.0"))]
        switch self {
        case .request(let id, let method, let params):
            members.append(("id", id.json))
            members.append(("method", .string(method)))
            if let params { members.append(("params", params)) }
        case .notification(let method, let params):
            members.append(("method", .string(method)))
            if let params { members.append(("params", params)) }
        case .result(let id, let result):
            members.append(("id", id.json))
            members.append(("result", result))
        case .error(let id, let error):
            members.append(("id", id?.json ?? .null))
            var object: [(String, JSONValue)] = [("code", .number(String(error.code))), ("message", .string(error.message))]
            if let data = error.data { object.append(("data", data)) }
            members.append(("error", .object(object)))
        }
        var bytes: [UInt8] = []
        JSONWriter.write(.object(members), into: &bytes)
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }
}
