import AgentCore

/// A JSON-RPC request id: the client sends integers; a server may use strings for its own
/// requests.
public enum JSONRPCID: Sendable, Hashable {
    case number(Int64)
    case string(String)

    /// The id in a message, or nil when it is not a string or an integer.
    init?(_ value: JSONValue) {
        switch value {
        case .string(let text): self = .string(text)
        case .number(let text):
            guard let number = Int64(text) else { return nil }
            self = .number(number)
        default: return nil
        }
    }

    var json: JSONValue {
        switch self {
        case .number(let number): .number(String(number))
        case .string(let text): .string(text)
        }
    }
}
