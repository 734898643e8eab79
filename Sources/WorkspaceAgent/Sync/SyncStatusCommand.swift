import AgentProto
import AgentSocket
import ArgumentParser
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// `exp sync status <unit>`: the unit's status, readiness and dependencies.
struct SyncStatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Show a unit's status and dependencies.",
        usage: "workspace-agent exp sync status <unit> [--output <output>] [--column <column> ...] [--socket-path <socket-path>]")

    @OptionGroup var socket: SyncSocketOptions
    /// Exactly one (the reference's message when not); an array so that message is ours.
    @Argument(help: ArgumentHelp("The unit.", valueName: "unit")) var units: [String] = []
    @Option(name: [.short, .long], help: "table or json.") var output: String = "table"
    @Option(name: [.customShort("c"), .long], help: "Columns: depends on, required status, current status, satisfied.")
    var column: [String] = []

    static let columns = ["depends on", "required status", "current status", "satisfied"]

    func run() async throws {
        try await runSync {
            guard units.count == 1 else { throw SyncFailure("exactly one unit name is required") }
            guard ["table", "json"].contains(output) else { throw SyncFailure("unknown output format \(quoted(output)) (table or json)") }
            let unit = units[0]
            let status: Coder_Agentsocket_V1_SyncStatusResponse
            do { status = try await socket.client.syncStatus(unit) } catch { throw SyncFailure("get status failed", error) }
            let dependencies = status.dependencies.sorted { $0.dependsOn < $1.dependsOn }
            if output == "json" {
                let json = GoJSON.object([
                    ("unit_name", .string(unit)), ("status", .string(status.status)), ("is_ready", .bool(status.isReady)),
                    (
                        "dependencies",
                        dependencies.isEmpty
                            ? .null
                            : .array(
                                dependencies.map { dependency in
                                    .object([
                                        ("depends_on", .string(dependency.dependsOn)), ("required_status", .string(dependency.requiredStatus)),
                                        ("current_status", .string(dependency.currentStatus)), ("is_satisfied", .bool(dependency.isSatisfied)),
                                    ])
                                })
                    ),
                ])
                emit(json.render())
                return
            }
            let selected = try selectColumns(column, from: Self.columns)
            var lines = [
                "Unit: \(unit)", "Status: \(Self.shown(status.status))", "Ready: \(Self.isReady(status))", "", "Dependencies:",
            ]
            if dependencies.isEmpty {
                lines.append("No dependencies found")
            } else {
                let rows = dependencies.map { dependency in
                    [dependency.dependsOn, Self.shown(dependency.requiredStatus), Self.shown(dependency.currentStatus), "\(dependency.isSatisfied)"]
                }
                lines.append(
                    renderTable(
                        headers: selected.map { Self.columns[$0].uppercased() }, rows: rows.map { row in selected.map { row[$0] } }))
            }
            emit(lines.joined(separator: "\n"))
        }
    }

    /// The table's readiness: the wire says an unregistered unit is ready (so `start` may
    /// register it), but a person reading `Status: not registered` must not be told it is.
    static func isReady(_ status: Coder_Agentsocket_V1_SyncStatusResponse) -> Bool {
        !status.status.isEmpty && status.isReady
    }

    /// `not registered` for the empty status, as the reference's table shows it.
    static func shown(_ status: String) -> String { status.isEmpty ? "not registered" : status }
}
