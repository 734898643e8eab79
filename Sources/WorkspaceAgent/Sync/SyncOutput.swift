import AgentCore
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The reference CLI's table: every cell, the last column too, padded to its column's
/// width plus two spaces; a header row in capitals.
func renderTable(headers: [String], rows: [[String]]) -> String {
    var widths = headers.map(\.count)
    for row in rows {
        for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) }
    }
    func line(_ cells: [String]) -> String {
        cells.enumerated().map { index, cell in cell + String(repeating: " ", count: widths[index] + 2 - cell.count) }.joined()
    }
    return ([line(headers)] + rows.map(line)).joined(separator: "\n")
}

/// Picks the columns named with `-c` (case-insensitive), in the order given; all when none.
func selectColumns(_ chosen: [String], from all: [String]) throws -> [Int] {
    let names = chosen.flatMap { $0.split(separator: ",").map { $0.trimmingSpaces().lowercased() } }
    guard !names.isEmpty else { return Array(all.indices) }
    return try names.map { name in
        guard let index = all.firstIndex(of: name) else {
            throw SyncFailure("unknown column \(quoted(name)) (choose from \(all.joined(separator: ", ")))")
        }
        return index
    }
}

/// Go's `json.MarshalIndent(v, "", "  ")` of the few shapes the CLI prints: objects keep
/// their key order, strings are escaped as Go escapes them.
indirect enum GoJSON {
    case string(String)
    case bool(Bool)
    case integer(UInt64)
    case object([(String, GoJSON)])
    case array([GoJSON])
    case null

    func render(indent: String = "") -> String {
        let inner = indent + "  "
        switch self {
        case .string(let text): return Self.quote(text)
        case .bool(let value): return value ? "true" : "false"
        case .integer(let value): return String(value)
        case .null: return "null"
        case .array(let items):
            if items.isEmpty { return "[]" }
            return "[\n" + items.map { inner + $0.render(indent: inner) }.joined(separator: ",\n") + "\n" + indent + "]"
        case .object(let fields):
            if fields.isEmpty { return "{}" }
            return "{\n" + fields.map { inner + Self.quote($0.0) + ": " + $0.1.render(indent: inner) }.joined(separator: ",\n") + "\n" + indent + "}"
        }
    }

    static func quote(_ text: String) -> String { jsonQuote(text, escapingHTML: true) }
}
