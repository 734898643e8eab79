import FoundationEssentials
import HTTPTypes

extension JSONRequest {
    /// Decodes `bytes` as `T` (Foundation's JSON decoder); a failure is 400 `message`, its
    /// detail naming the offending field by its JSON path and what belongs there
    /// (`pty.rows: expected an integer`, `env[2]: expected a string`), never a Swift type.
    public static func decode<T: Decodable>(
        _ type: T.Type, from bytes: some Collection<UInt8>, message: String = "Request body must be valid JSON."
    ) throws(APIError) -> T {
        do {
            return try JSONDecoder().decode(type, from: Data(bytes))
        } catch let error as DecodingError {
            throw APIError(.badRequest, message, detail: describe(error))
        } catch {
            throw APIError(.badRequest, message, detail: "The body is not valid JSON, or a number in it is out of range for its field.")
        }
    }

    /// A decoding error in the body's terms: the field's JSON path and the problem.
    static func describe(_ error: DecodingError) -> String {
        switch error {
        case .typeMismatch(let type, let context):
            return "\(jsonPath(context.codingPath)): expected \(jsonKind(type))"
        case .valueNotFound(let type, let context):
            return "\(jsonPath(context.codingPath)): expected \(jsonKind(type)), got null"
        case .keyNotFound(let key, let context):
            return "\(jsonPath(context.codingPath + [key])): required"
        case .dataCorrupted(let context):
            if !context.codingPath.isEmpty { return "\(jsonPath(context.codingPath)): invalid value" }
            // Foundation reports a number too large for its field as invalid JSON, without a path.
            return "The body is not valid JSON, or a number in it is out of range for its field."
        @unknown default:
            return "The body does not have the expected shape."
        }
    }

    /// `pty.rows`, `env[2]`, `files[0].path`; `(body)` for the body itself.
    static func jsonPath(_ codingPath: [any CodingKey]) -> String {
        var out = ""
        for key in codingPath {
            if let index = key.intValue {
                out += "[\(index)]"
            } else {
                out += out.isEmpty ? key.stringValue : ".\(key.stringValue)"
            }
        }
        return out.isEmpty ? "(body)" : out
    }

    /// What a JSON document holds where a value of `type` belongs.
    static func jsonKind(_ type: Any.Type) -> String {
        switch type {
        case is any BinaryInteger.Type: return "an integer"
        case is any BinaryFloatingPoint.Type, is Decimal.Type: return "a number"
        case is any StringProtocol.Type: return "a string"
        case is Bool.Type: return "a boolean"
        default:
            let name = String(describing: type)
            if name.hasPrefix("Array<") || name.hasPrefix("[") && !name.contains(":") { return "an array" }
            return "an object"
        }
    }
}
