import AgentCore
import AgentSocket
import ArgumentParser

/// `exp chat context tools [<server>]`: the MCP servers the agent runs and their tools (not
/// in the reference, whose snapshot rows list none), over the agent socket.
struct ChatContextToolsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tools", abstract: "List the workspace MCP servers and their tools (descriptions cut to 512 bytes by the agent).",
        usage: "workspace-agent exp chat context tools [<server>] [--output <output>] [--socket-path <socket-path>]")

    @OptionGroup var socket: SyncSocketOptions
    @Argument(help: ArgumentHelp("Only this server.", valueName: "server")) var server: String?
    @Option(name: [.short, .long], help: "table or json.") var output: String = "table"

    static let headers = ["SERVER", "STATE", "TOOL", "DESCRIPTION"]

    func run() async throws {
        try await runSync {
            guard ["table", "json"].contains(output) else { throw SyncFailure("unknown output format \(quoted(output)) (table or json)") }
            let text: String
            do { text = try await socket.client.mcpServersJSON() } catch { throw SyncFailure("list MCP tools", error) }
            guard let servers = (try? JSONValue.parseWhole(Array(text.utf8)))?["servers"]?.arrayValue else {
                throw SyncFailure("list MCP tools: the agent's answer is not a server list")
            }
            // The engine's rows for configuration files in trouble are not servers.
            var shown = servers.filter { $0["transport"]?.stringValue != "config" }
            if let server {
                shown = shown.filter { $0["name"]?.stringValue == server }
                guard !shown.isEmpty else { throw SyncFailure("list MCP tools: unknown MCP server: \(quoted(server))") }
            }
            if output == "json" {
                emit(GoJSON.array(shown.map(Self.json)).render())
            } else if shown.isEmpty {
                emit("No MCP servers declared.")
            } else {
                emit(renderTable(headers: Self.headers, rows: shown.flatMap(Self.rows)))
            }
        }
    }

    /// One row per tool (its description's first line); a server without tools gets one
    /// row saying why (its last error) or nothing.
    static func rows(_ server: JSONValue) -> [[String]] {
        let name = server["name"]?.stringValue ?? ""
        let state = server["state"]?.stringValue ?? ""
        let tools = server["tools"]?.arrayValue ?? []
        guard !tools.isEmpty else { return [[name, state, "", server["last_error"]?.stringValue ?? ""]] }
        var rows = tools.map { tool in
            let description = tool["description"]?.stringValue ?? ""
            return [name, state, tool["name"]?.stringValue ?? "", String(description.prefix { $0 != "\n" && $0 != "\r" })]
        }
        if let omitted = server["tools_omitted"]?.intValue { rows.append([name, state, "", "(\(omitted) more tools not shown)"]) }
        return rows
    }

    static func json(_ server: JSONValue) -> GoJSON {
        let tools = (server["tools"]?.arrayValue ?? []).map { tool -> GoJSON in
            .object([("name", .string(tool["name"]?.stringValue ?? "")), ("description", .string(tool["description"]?.stringValue ?? ""))])
        }
        return .object([
            ("name", .string(server["name"]?.stringValue ?? "")), ("transport", .string(server["transport"]?.stringValue ?? "")),
            ("state", .string(server["state"]?.stringValue ?? "")), ("last_error", .string(server["last_error"]?.stringValue ?? "")),
            ("tools", .array(tools)), ("tools_omitted", .integer(UInt64(max(0, server["tools_omitted"]?.intValue ?? 0)))),
        ])
    }
}

/// `exp chat context restart <server>`: stops an MCP server and connects it again now, so
/// that a server whose code changed is listed anew (nothing else notices such a change).
struct ChatContextRestartCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restart", abstract: "Restart a workspace MCP server and list its tools again.",
        usage: "workspace-agent exp chat context restart <server> [--socket-path <socket-path>]")

    @OptionGroup var socket: SyncSocketOptions
    @Argument(help: ArgumentHelp("The server's name in .mcp.json.", valueName: "server")) var server: String

    func run() async throws {
        try await runSync {
            let text: String
            do { text = try await socket.client.restartMCPServer(server) } catch { throw SyncFailure("restart MCP server", error) }
            let row = try? JSONValue.parseWhole(Array(text.utf8))
            let tools = row?["tool_count"]?.intValue ?? 0
            emit("Restarted MCP server \(server) (\(tools) \(tools == 1 ? "tool" : "tools")).")
        }
    }
}
