import AgentTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `workspace-agent exp chat context` through the real binary against a real agent (its
/// context manager behind the agent socket), with a real home and working directory: the
/// reference's outputs, errors and exit statuses.
@Suite(.timeLimit(.minutes(2)))
struct WorkspaceAgentChatContextCLITests {
    /// Runs `exp chat context <arguments> --socket-path <socket>` in `directory`.
    static func context(_ arguments: [String], socket: String, directory: String? = nil) async -> (output: String, status: Int32) {
        await AgentDaemon.command(["exp", "chat", "context"] + arguments + ["--socket-path", socket], directory: directory)
    }

    /// An agent with its home, its working directory (`<home>/project`) and its socket, all fresh.
    static func withAgent(_ body: (_ home: String, _ socket: String) async throws -> Void) async throws {
        let base = NSTemporaryDirectory() + "ctx-cli-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: base + "/project", withIntermediateDirectories: true)
        let home = URL(fileURLWithPath: base).resolvingSymlinksInPath().path
        defer { try? FileManager.default.removeItem(atPath: home) }
        let socket = home + "/agent.sock"
        let agent = try AgentDaemon.launch(
            ["--http-address", "127.0.0.1:0", "--socket-path", socket, "--directory", home + "/project"], environment: ["HOME": home])
        defer { agent.cleanup() }
        _ = try await agent.port()
        #expect(await eventually { agent.log.contains("agent socket listening") }, "log:\n\(agent.log)")
        try await body(home, socket)
        agent.signal(SIGTERM)
        #expect(await agent.exitStatus() == 0)
    }

    /// The reference's table: each cell padded to its column's width plus two spaces.
    static func table(_ headers: [String], _ rows: [[String]]) -> String {
        var widths = headers.map(\.count)
        for row in rows { for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) } }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { $1 + String(repeating: " ", count: widths[$0] + 2 - $1.count) }.joined()
        }
        return ([line(headers)] + rows.map(line)).joined(separator: "\n") + "\n"
    }

    @Test func listAddShowRefreshRemove() async throws {
        try await Self.withAgent { home, socket in
            func run(_ arguments: String..., in directory: String? = nil) async -> (output: String, status: Int32) {
                await Self.context(arguments, socket: socket, directory: directory)
            }
            // The seeded sources, sorted by path as the reference's table is.
            let seeds = [home + "/.coder", home + "/.coder/skills", home + "/project/.agents/skills", home + "/project/.mcp.json"]
            #expect(await run("list") == (Self.table(["PATH"], seeds.sorted().map { [$0] }), 0))
            let json = await run("list", "-o", "json")
            #expect(json.output.hasPrefix("[\n  {\n    \"path\": \"\(home)/.coder\"\n  },\n"), "\(json)")

            // A relative path is resolved against the CLI's directory; the agent answers the lexical path.
            try FileManager.default.createDirectory(atPath: home + "/notes", withIntermediateDirectories: true)
            try TestFile.write(home + "/notes/AGENTS.md", "# Notes\nbe brief\n", atomically: true)
            #expect(await run("add", "notes", in: home) == ("Registered context source \(home)/notes\n", 0))
            // `~` is left for the agent to expand against its own home.
            #expect(await run("add", "~/notes/") == ("Registered context source \(home)/notes\n", 0))
            let listed = await run("list").output.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            #expect(listed.contains(home + "/notes"), "\(listed)")

            let refreshed = await run("refresh")
            #expect(refreshed.status == 0 && refreshed.output.hasPrefix("Re-resolved agent context (version "), "\(refreshed)")
            #expect(refreshed.output.hasSuffix(" resources).\n"), "\(refreshed)")
            let expectedShow =
                "Source: \(home)/notes (1 resources)\n"
                + Self.table(
                    ["KIND", "NAME", "SOURCE", "STATUS", "SIZE BYTES", "ERROR"], [["instruction_file", "", home + "/notes/AGENTS.md", "ok", "17", ""]])
            #expect(await run("show", "../notes", in: home + "/project") == (expectedShow, 0))
            let shownJSON = await run("show", home + "/notes", "-o", "json")
            #expect(shownJSON.status == 0 && shownJSON.output.hasPrefix("[\n  {\n    \"kind\": \"instruction_file\",\n    \"name\": \"\",\n"))
            #expect(shownJSON.output.contains("    \"size_bytes\": 17,\n") && shownJSON.output.contains("    \"description\": \"Notes\",\n"))
            #expect(shownJSON.output.contains("    \"content_hash\": \"") && shownJSON.output.hasSuffix("  }\n]\n"), "\(shownJSON)")

            // An AGENTS.md that appears in the working directory is in the snapshot after a refresh.
            try TestFile.write(home + "/project/AGENTS.md", "# Project\n", atomically: true)
            #expect(await run("refresh").status == 0)
            let all = await run("show")
            #expect(all.status == 0 && all.output.contains("instruction_file  ") && all.output.contains(home + "/project/AGENTS.md  "), "\(all)")
            let snapshotJSON = await run("show", "-o", "json")
            #expect(snapshotJSON.output.hasPrefix("{\n  \"version\": ") && snapshotJSON.output.contains("\"id\": \"instruction_file:\(home)/project/AGENTS.md\""))

            #expect(await run("remove", "notes", in: home) == ("Removed context source \(home)/notes\n", 0))
            #expect(!(await run("list").output.contains("/notes")))
            #expect(
                await run("remove", "notes", in: home)
                    == ("error: remove context source: \"\(home)/notes\": context source not found\n", 1))
            #expect(await run("show", "notes", in: home) == ("error: get context source: \"\(home)/notes\": context source not found\n", 1))
        }
    }

    @Test func badPathsAndNoAgent() async throws {
        try await Self.withAgent { home, socket in
            func run(_ arguments: String...) async -> (output: String, status: Int32) {
                await Self.context(arguments, socket: socket, directory: home)
            }
            #expect(await run("add", "/etc") == ("error: add context source: path \"/etc\" is not inside any allowed root\n", 1))
            #expect(await run("add", " ") == ("error: path is empty\n", 1))
            #expect(await run("list").output.contains("/etc") == false)
        }
        let gone = NSTemporaryDirectory() + "no-agent-\(UUID().uuidString.prefix(8)).sock"
        let dial = await Self.context(["list"], socket: gone)
        #expect(dial.status == 1 && dial.output.hasPrefix("error: connect to agent socket: connect to socket: dial unix \(gone): "), "\(dial)")
    }
}
