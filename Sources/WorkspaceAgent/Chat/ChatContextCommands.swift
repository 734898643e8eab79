import AgentProto
import AgentSocket
import ArgumentParser
import ChatContext
import FoundationEssentials

/// `exp chat`: chat commands run from inside the workspace.
struct ChatCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chat", abstract: "Manage agent chats from inside the workspace.", subcommands: [ChatContextCommand.self])
}

/// `exp chat context`: the chat context's sources and snapshot, over the agent socket.
struct ChatContextCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "context",
        abstract: "Manage workspace context: the sources the agent resolves (instruction files, skills and MCP configs), its snapshot, a new resolve, and the MCP servers' tools and restarts.",
        subcommands: [
            ChatContextListCommand.self, ChatContextShowCommand.self, ChatContextAddCommand.self, ChatContextRemoveCommand.self,
            ChatContextRefreshCommand.self, ChatContextToolsCommand.self, ChatContextRestartCommand.self,
        ]
    )

    /// A source path as the reference's CLI sends it: trimmed; `~` and `~/…` left for the
    /// agent to expand against its own home; any other relative path joined to this
    /// process's working directory; cleaned.
    static func sourcePath(_ raw: String) throws(SyncFailure) -> String {
        let path = String(raw.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
        guard !path.isEmpty else { throw SyncFailure("path is empty") }
        if path == "~" || path.hasPrefix("~/") { return path }
        if path.hasPrefix("/") { return ContextSourcePath.clean(path) }
        return ContextSourcePath.clean(FileManager.default.currentDirectoryPath + "/" + path)
    }

    /// `<what>: <cause>`, saying `<what>` once when the agent's text already starts with it
    /// (its socket answers `add context source: …` itself; the reference's CLI says it twice).
    static func failure(_ what: String, _ cause: any Error) -> SyncFailure {
        let failure = SyncFailure(what, cause)
        let twice = what + ": " + what + ": "
        guard failure.description.hasPrefix(twice) else { return failure }
        return SyncFailure(String(failure.description.dropFirst(what.count + 2)))
    }
}

/// `exp chat context list`: the sources registered on the agent (the built-in roots are
/// always scanned and are not listed).
struct ChatContextListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List the workspace context sources registered on the agent.")

    @OptionGroup var socket: SyncSocketOptions
    @Option(name: [.short, .long], help: "table or json.") var output: String = "table"

    func run() async throws {
        try await runSync {
            guard ["table", "json"].contains(output) else { throw SyncFailure("unknown output format \(quoted(output)) (table or json)") }
            let sources: [String]
            do { sources = try await socket.client.contextSources() } catch { throw SyncFailure("list context sources", error) }
            if output == "json" {
                emit(GoJSON.array(sources.map { .object([("path", .string($0))]) }).render())
            } else if sources.isEmpty {
                emit("No context sources registered.")
            } else {
                emit(renderTable(headers: ["PATH"], rows: sources.sorted().map { [$0] }))
            }
        }
    }
}

/// `exp chat context add <path>`: registers an extra scan root.
struct ChatContextAddCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add", abstract: "Register a workspace context source (a file or a directory the agent scans).",
        usage: "workspace-agent exp chat context add <path> [--socket-path <socket-path>]")

    @OptionGroup var socket: SyncSocketOptions
    @Argument(help: ArgumentHelp("The file or directory.", valueName: "path")) var path: String

    func run() async throws {
        try await runSync {
            let resolved = try ChatContextCommand.sourcePath(path)
            let added: String
            do { added = try await socket.client.addContextSource(resolved) } catch { throw ChatContextCommand.failure("add context source", error) }
            emit("Registered context source \(added)")
        }
    }
}

/// `exp chat context remove <path>`: removes a registered source.
struct ChatContextRemoveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove", abstract: "Remove a workspace context source (the built-in roots cannot be removed).",
        usage: "workspace-agent exp chat context remove <path> [--socket-path <socket-path>]")

    @OptionGroup var socket: SyncSocketOptions
    @Argument(help: ArgumentHelp("The registered path.", valueName: "path")) var path: String

    func run() async throws {
        try await runSync {
            let resolved = try ChatContextCommand.sourcePath(path)
            do { try await socket.client.removeContextSource(resolved) } catch { throw ChatContextCommand.failure("remove context source", error) }
            emit("Removed context source \(resolved)")
        }
    }
}

/// `exp chat context refresh`: a new resolve of every source, and its version. (The
/// reference then asks the control plane to re-pin drifted chats; that is the control
/// plane's API, which this agent does not call.)
struct ChatContextRefreshCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "refresh", abstract: "Re-resolve the agent's workspace context and print the new snapshot's version.")

    @OptionGroup var socket: SyncSocketOptions

    func run() async throws {
        try await runSync {
            let snapshot: Coder_Agentsocket_V1_ContextSnapshot
            do { snapshot = try await socket.client.resyncContext() } catch { throw SyncFailure("re-resolve agent context", error) }
            emit("Re-resolved agent context (version \(snapshot.version), \(snapshot.resources.count) resources).")
            if !snapshot.snapshotError.isEmpty { emit("Snapshot reported an error: \(snapshot.snapshotError)") }
        }
    }
}
