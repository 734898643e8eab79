extension JSONValue {
    /// Go's `json.MarshalIndent(v, "", indent)` of a value Go decoded into `any`: objects'
    /// keys sorted (Go's maps) when `sortingKeys`, strings escaped as Go escapes them
    /// (`<`, `>`, `&` too), numbers as they were parsed, empty objects and arrays as `{}` `[]`.
    public func indented(_ indent: String = "  ", sortingKeys: Bool = true, prefix: String = "") -> String {
        let inner = prefix + indent
        switch self {
        case .null: return "null"
        case .bool(let flag): return flag ? "true" : "false"
        case .number(let text): return text
        case .string(let text): return jsonQuote(text, escapingHTML: true)
        case .array(let items):
            if items.isEmpty { return "[]" }
            return "[\n" + items.map { inner + $0.indented(indent, sortingKeys: sortingKeys, prefix: inner) }.joined(separator: ",\n")
                + "\n" + prefix + "]"
        case .object(let members):
            let unique = Self.goMapMembers(members, sorted: sortingKeys)
            if unique.isEmpty { return "{}" }
            return "{\n"
                + unique.map { inner + jsonQuote($0.0, escapingHTML: true) + ": " + $0.1.indented(indent, sortingKeys: sortingKeys, prefix: inner) }
                .joined(separator: ",\n") + "\n" + prefix + "}"
        }
    }
}

extension JSONValue {
    /// An object's members as Go's `map[string]any` holds them: one per key (the last wins)
    /// and, when `sorted`, in the byte order `encoding/json` writes them.
    public static func goMapMembers(_ members: [(String, JSONValue)], sorted: Bool = true) -> [(String, JSONValue)] {
        var unique: [(String, JSONValue)] = []
        var index: [String: Int] = [:]
        for (key, value) in members {
            if let at = index[key] { unique[at].1 = value } else { index[key] = unique.count; unique.append((key, value)) }
        }
        if sorted { unique.sort { Array($0.0.utf8).lexicographicallyPrecedes(Array($1.0.utf8)) } }
        return unique
    }
}
