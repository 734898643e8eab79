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
            var unique: [(String, JSONValue)] = []
            for (key, value) in members {
                if let index = unique.firstIndex(where: { $0.0 == key }) { unique[index].1 = value } else { unique.append((key, value)) }
            }
            if sortingKeys { unique.sort { Array($0.0.utf8).lexicographicallyPrecedes(Array($1.0.utf8)) } }
            if unique.isEmpty { return "{}" }
            return "{\n" + unique.map { inner + jsonQuote($0.0, escapingHTML: true) + ": " + $0.1.indented(indent, sortingKeys: sortingKeys, prefix: inner) }
                .joined(separator: ",\n") + "\n" + prefix + "}"
        }
    }
}
