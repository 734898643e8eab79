import AgentProto
import AgentSocket
import ArgumentParser

/// `exp chat context show [<path>]`: a registered source and the resources the agent
/// resolves from it, failed ones included; beyond the reference, with no path, every
/// resource of the current snapshot (no new resolve).
struct ChatContextShowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show", abstract: "Show a context source and the resources it contributes (no path: the whole snapshot).",
        usage: "workspace-agent exp chat context show [<path>] [--output <output>] [--socket-path <socket-path>]")

    @OptionGroup var socket: SyncSocketOptions
    @Argument(help: ArgumentHelp("A registered source.", valueName: "path")) var path: String?
    @Option(name: [.short, .long], help: "table or json.") var output: String = "table"

    static let headers = ["KIND", "NAME", "SOURCE", "STATUS", "SIZE BYTES", "ERROR"]

    func run() async throws {
        try await runSync {
            guard ["table", "json"].contains(output) else { throw SyncFailure("unknown output format \(quoted(output)) (table or json)") }
            let client = socket.client
            var source: String?
            if let path {
                let resolved = try ChatContextCommand.sourcePath(path)
                do { source = try await client.contextSource(resolved) } catch { throw SyncFailure("get context source", error) }
            }
            let snapshot: Coder_Agentsocket_V1_ContextSnapshot
            do { snapshot = try await client.contextSnapshot() } catch { throw SyncFailure("get context snapshot", error) }
            guard let source else {
                if output == "json" {
                    emit(Self.json(snapshot).render())
                } else {
                    var lines = ["Snapshot: version \(snapshot.version), \(snapshot.resources.count) resources"]
                    if !snapshot.snapshotError.isEmpty { lines.append("Snapshot reported an error: \(snapshot.snapshotError)") }
                    emit((lines + [Self.table(snapshot.resources)]).joined(separator: "\n"))
                }
                return
            }
            let resources = snapshot.resources.filter { $0.sourcePath == source }
            if output == "json" {
                emit(GoJSON.array(resources.map(Self.json)).render())
            } else {
                emit("Source: \(source) (\(resources.count) resources)\n" + Self.table(resources))
            }
        }
    }

    /// The reference's table: sorted by kind (stable, so by source within a kind).
    static func table(_ resources: [Coder_Agentsocket_V1_ContextResource]) -> String {
        let sorted = resources.enumerated().sorted { ($0.element.kind, $0.offset) < ($1.element.kind, $1.offset) }.map(\.element)
        return renderTable(headers: headers, rows: sorted.map { [$0.kind, $0.name, $0.source, $0.status, "\($0.sizeBytes)", $0.error] })
    }

    /// A resource as the reference's CLI prints it in JSON (its field order).
    static func json(_ r: Coder_Agentsocket_V1_ContextResource) -> GoJSON {
        .object([
            ("kind", .string(r.kind)), ("name", .string(r.name)), ("source", .string(r.source)), ("source_path", .string(r.sourcePath)),
            ("status", .string(r.status)), ("size_bytes", .integer(r.sizeBytes)), ("error", .string(r.error)),
            ("description", .string(r.description_p)), ("id", .string(r.id)), ("content_hash", .string(r.contentHash)),
        ])
    }

    static func json(_ s: Coder_Agentsocket_V1_ContextSnapshot) -> GoJSON {
        .object([
            ("version", .integer(s.version)), ("aggregate_hash", .string(s.aggregateHash)), ("resources", .array(s.resources.map(json))),
            ("payload_bytes", .integer(s.payloadBytes)), ("snapshot_error", .string(s.snapshotError)),
        ])
    }
}
