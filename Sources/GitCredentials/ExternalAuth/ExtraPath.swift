import AgentJSON

/// `--extra`'s path into a token's extra properties, the part of gjson's syntax a path to one
/// value uses: keys joined by `.` (`\.` and `\\` escaped), array indexes, `#` for an array's
/// length. The result is printed as gjson's `Result.String()` prints it.
public enum ExtraPath {
    /// A path longer than this is refused as not found (gjson paths are short).
    public static let maxBytes = 4096

    /// The value at `path` as text: a string unquoted, a number or boolean as written, an
    /// object or array as compact JSON (keys sorted, as Go re-encoded them); "" when absent
    /// or `null`.
    public static func lookup(_ path: String, in root: JSONValue) -> String {
        guard path.utf8.count <= maxBytes else { return "" }
        var current = root
        for component in components(path) {
            switch current {
            case .object(let members):
                guard let value = members.last(where: { $0.0 == component })?.1 else { return "" }
                current = value
            case .array(let items):
                if component == "#" {
                    current = .number(String(items.count))
                } else if let index = Int(component), index >= 0, index < items.count {
                    current = items[index]
                } else {
                    return ""
                }
            default:
                return ""
            }
        }
        switch current {
        case .null: return ""
        case .bool(let flag): return flag ? "true" : "false"
        case .number(let text): return text
        case .string(let text): return text
        case .array, .object: return compact(current)
        }
    }

    /// The path split at unescaped dots, escapes removed.
    static func components(_ path: String) -> [String] {
        var parts: [String] = []
        var current = ""
        var escaped = false
        for character in path {
            if escaped {
                current.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "." {
                parts.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        parts.append(current)
        return parts
    }

    /// Go's `json.Marshal` of a decoded value: maps' keys sorted, HTML characters escaped.
    static func compact(_ value: JSONValue) -> String {
        switch value {
        case .null: return "null"
        case .bool(let flag): return flag ? "true" : "false"
        case .number(let text): return text
        case .string(let text): return jsonQuote(text, escapingHTML: true)
        case .array(let items): return "[" + items.map(compact).joined(separator: ",") + "]"
        case .object(let members):
            return "{" + JSONValue.goMapMembers(members).map { jsonQuote($0.0, escapingHTML: true) + ":" + compact($0.1) }.joined(separator: ",") + "}"
        }
    }
}
