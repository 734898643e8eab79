import AgentProto
import AgentSocket
import ArgumentParser

/// `exp sync list`: every registered unit; beyond the reference, `-o dot` prints the unit
/// graph for Graphviz.
struct SyncListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the registered units.")

    @OptionGroup var socket: SyncSocketOptions
    @Option(name: [.short, .long], help: "table, json, or dot (the unit graph for Graphviz).") var output: String = "table"
    @Option(name: [.customShort("c"), .long], help: "Columns: unit, status, ready.") var column: [String] = []

    static let columns = ["unit", "status", "ready"]

    func run() async throws {
        try await runSync {
            guard ["table", "json", "dot"].contains(output) else {
                throw SyncFailure("unknown output format \(quoted(output)) (table, json or dot)")
            }
            let client = socket.client
            let units: [Coder_Agentsocket_V1_UnitInfo]
            do { units = try await client.syncList().sorted { $0.unit < $1.unit } } catch { throw SyncFailure("list units failed", error) }
            switch output {
            case "json":
                let json: GoJSON =
                    units.isEmpty
                    ? .null
                    : .array(
                        units.map { unit in
                            .object([("unit_name", .string(unit.unit)), ("status", .string(unit.status)), ("is_ready", .bool(unit.isReady))])
                        })
                emit(json.render())
            case "dot":
                var statuses: [String: Coder_Agentsocket_V1_SyncStatusResponse] = [:]
                for unit in units {
                    do { statuses[unit.unit] = try await client.syncStatus(unit.unit) } catch { throw SyncFailure("get status failed", error) }
                }
                emit(Self.dot(units, statuses))
            default:
                if units.isEmpty {
                    emit("No units registered")
                    return
                }
                let selected = try selectColumns(column, from: Self.columns)
                let rows = units.map { [$0.unit, $0.status, "\($0.isReady)"] }
                emit(renderTable(headers: selected.map { Self.columns[$0].uppercased() }, rows: rows.map { row in selected.map { row[$0] } }))
            }
        }
    }

    /// The graph: each unit labelled with its status (bare dependency names dashed), each
    /// edge "unit wants dependency" labelled with the status it requires, unsatisfied edges
    /// red and dashed.
    static func dot(_ units: [Coder_Agentsocket_V1_UnitInfo], _ statuses: [String: Coder_Agentsocket_V1_SyncStatusResponse]) -> String {
        var lines = ["digraph units {", "  rankdir=LR;", "  node [shape=box];"]
        var known = Set(units.map(\.unit))
        for unit in units {
            let ready = unit.isReady ? "ready" : "not ready"
            lines.append("  \(dotQuote(unit.unit)) [label=\(dotQuote("\(unit.unit)\n\(unit.status), \(ready)"))];")
        }
        for unit in units {
            for dependency in (statuses[unit.unit]?.dependencies ?? []).sorted(by: { $0.dependsOn < $1.dependsOn }) {
                if known.insert(dependency.dependsOn).inserted {
                    lines.append("  \(dotQuote(dependency.dependsOn)) [label=\(dotQuote("\(dependency.dependsOn)\nnot registered")), style=dashed];")
                }
                let style = dependency.isSatisfied ? "" : ", color=red, style=dashed"
                lines.append("  \(dotQuote(unit.unit)) -> \(dotQuote(dependency.dependsOn)) [label=\(dotQuote(dependency.requiredStatus))\(style)];")
            }
        }
        lines.append("}")
        return lines.joined(separator: "\n")
    }

    /// A DOT quoted string (Graphviz's escString): `\` and `"` escaped, a newline as `\n`
    /// (a line break in a label), other control characters left out. JSON's `\u003c` means
    /// nothing to Graphviz and showed literally.
    static func dotQuote(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F: continue
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
