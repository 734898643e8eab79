import AgentCore
import ArgumentParser
import HostStats

#if canImport(Glibc)
import Glibc
#endif

/// `stat` (Coder's `coder stat`): one row of host CPU, host memory, home disk and, in a
/// container, its CPU and memory, as a table or JSON. No control plane involved.
struct StatCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stat",
        abstract: "Show resource usage for the current workspace.",
        subcommands: [StatCPUCommand.self, StatMemCommand.self, StatDiskCommand.self]
    )

    /// The table's columns, in the reference's order and spelling.
    static let columns = ["host cpu", "host memory", "home disk", "container cpu", "container memory"]

    @Option(
        name: [.customShort("c"), .long],
        help: ArgumentHelp(
            "Columns to display in table output (comma-separated; default: all).",
            valueName: "host cpu|host memory|home disk|container cpu|container memory"))
    var column: [String] = []

    @OptionGroup var common: StatCommonOptions

    func run() throws {
        let format = try common.format(among: ["table", "json"])
        let columns = try selectedColumns()
        let statter = try common.statter()
        let row = try measure(statter)
        let output: String
        switch format {
        case "table": output = StatTable.render(row: row, columns: columns)
        case "json": output = try StatTable.json(row: row)
        default: throw StatFailure("unknown output format \(goQuote(format))")
        }
        print(output)
    }

    /// `-c` given (each a comma-separated list, repeats adding up) or all columns; a value
    /// is matched ignoring case, as the reference's enum flag does. Shown in the table's own
    /// order, each once: the reference's table hides the columns not chosen.
    func selectedColumns() throws -> [String] {
        guard !column.isEmpty else { return Self.columns }
        var chosen: [String] = []
        for value in column {
            // `-c ""` clears the list: every column is shown.
            if value.isEmpty { chosen = []; continue }
            for name in value.split(separator: ",", omittingEmptySubsequences: false).map(String.init) {
                guard let match = Self.columns.first(where: { $0.lowercased() == name.lowercased() }) else {
                    throw StatFailure(invalidChoice(value, item: name, flag: "-c, --column", Self.columns))
                }
                chosen.append(match)
            }
        }
        return chosen.isEmpty ? Self.columns : Self.columns.filter(chosen.contains)
    }

    /// The row, in the reference's order: CPU (host and container sampled side by side),
    /// host memory, the home directory's disk, then the container's memory.
    func measure(_ statter: HostStatter) throws -> StatTable.Row {
        let containerized = (try? statter.isContainerized().get()) ?? false
        let cpu = statter.cpu(host: true, container: containerized)
        var row = StatTable.Row()
        row.hostCPU = try cpu.host?.orFail()
        row.containerCPU = try cpu.container?.orFail() ?? nil
        row.hostMemory = try statter.hostMemory(.gibi).orFail()
        guard let home = getenv("HOME").map({ String(cString: $0) }), !home.isEmpty else {
            throw StatFailure("$HOME is not defined")
        }
        row.homeDisk = try statter.disk(.gibi, path: home).orFail()
        if containerized {
            row.containerMemory = try statter.containerMemory(.gibi).orFail()
        }
        return row
    }
}
