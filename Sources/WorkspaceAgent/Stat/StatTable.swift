import HostStats

/// `stat`'s one-row output as the reference's table and JSON formatters print it.
enum StatTable {
    /// The figures of one `stat` run; nil where there is none (the container's outside one).
    struct Row {
        var hostCPU: StatResult?
        var hostMemory: StatResult?
        var homeDisk: StatResult?
        var containerCPU: StatResult?
        var containerMemory: StatResult?

        /// The figure under a column name of ``StatCommand/columns``.
        func figure(_ column: String) -> StatResult? {
            switch column {
            case "host cpu": hostCPU
            case "host memory": hostMemory
            case "home disk": homeDisk
            case "container cpu": containerCPU
            default: containerMemory
            }
        }
    }

    /// go-pretty as coder's `cliui.Table` sets it up: upper-case headers, no borders, cells
    /// left-aligned to the column's width plus two spaces; a missing figure is Go's `<nil>`.
    static func render(row: Row, columns: [String]) -> String {
        let headers = columns.map { $0.uppercased() }
        let cells = columns.map { row.figure($0)?.text ?? "<nil>" }
        let widths = zip(headers, cells).map { max($0.count, $1.count) }
        func line(_ texts: [String]) -> String {
            zip(texts, widths).map { $0 + String(repeating: " ", count: $1 - $0.count) + "  " }.joined()
        }
        return line(headers) + "\n" + line(cells)
    }

    /// `json.MarshalIndent` of the one-row list, keys in the reference's field order.
    static func json(row: Row) throws -> String {
        let fields: [(String, StatResult?)] = [
            ("host_cpu", row.hostCPU), ("host_memory", row.hostMemory), ("home_disk", row.homeDisk),
            ("container_cpu", row.containerCPU), ("container_memory", row.containerMemory),
        ]
        var lines: [String] = []
        for (key, figure) in fields {
            switch StatResult.json(figure, depth: 2) {
            case .success(let json): lines.append("    \"\(key)\": \(json)")
            case .failure(let error): throw StatFailure("marshal output to JSON: \(error)")
            }
        }
        return "[\n  {\n" + lines.joined(separator: ",\n") + "\n  }\n]"
    }
}
