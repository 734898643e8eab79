import AgentCore
import AgentProto
@testable import AgentSocket
import AgentTestSupport
import ChatContext
import Foundation
import Testing

/// The chat context calls over a real socket, on the real context manager over real files:
/// sources, the snapshot, resync, and the reference's error texts; and without a manager.
@Suite(.timeLimit(.minutes(3)))
struct ContextRPCTests {
    /// A home (canonical) with a project holding an `AGENTS.md`, removed at the end.
    final class Home {
        let root: String
        init() throws {
            let base = NSTemporaryDirectory() + "socket-context-\(UUID().uuidString.prefix(8))"
            try FileManager.default.createDirectory(atPath: base + "/project", withIntermediateDirectories: true)
            root = URL(fileURLWithPath: base).resolvingSymlinksInPath().path
            try TestFile.write(root + "/project/AGENTS.md", "# Project rules\n", atomically: true)
        }
        deinit { try? FileManager.default.removeItem(atPath: root) }
    }

    /// A running manager (gate open) behind a running socket server.
    func withManager(_ home: Home, _ body: (AgentSocketClient, ContextManager) async throws -> Void) async throws {
        let manager = ContextManager(
            configuration: .init(instructionsDirs: [], skillsDirs: [], mcpConfigFiles: []), home: home.root,
            directory: home.root + "/project", manifest: ManifestStore(), gate: .open)
        let task = Task { try await manager.run() }
        defer { task.cancel() }
        try await withSocketServer(context: manager) { client, _ in try await body(client, manager) }
    }

    /// The text the agent answered.
    func failure(_ body: () async throws -> Void) async -> String? {
        do {
            try await body()
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test func withoutAManagerEveryCallSaysSo() async throws {
        try await withSocketServer { client, _ in
            let unavailable = "context manager not available"
            #expect(await failure { _ = try await client.contextSources() } == unavailable)
            #expect(await failure { _ = try await client.contextSource("/tmp/x") } == unavailable)
            #expect(await failure { _ = try await client.addContextSource("/tmp/x") } == unavailable)
            #expect(await failure { try await client.removeContextSource("/tmp/x") } == unavailable)
            #expect(await failure { _ = try await client.contextSnapshot() } == unavailable)
            #expect(await failure { _ = try await client.resyncContext() } == unavailable)
            // The rest of the socket serves on.
            try await client.ping()
        }
    }

    @Test func sourcesSnapshotAndResync() async throws {
        let home = try Home()
        try await withManager(home) { client, _ in
            #expect(try await client.contextSources() == [])
            let first = try await client.resyncContext()
            #expect(first.version >= 1 && first.aggregateHash.count == 64)
            let agents = first.resources.first { $0.id == "instruction_file:\(home.root)/project/AGENTS.md" }
            #expect(agents?.kind == "instruction_file" && agents?.status == "ok" && agents?.description_p == "Project rules", "\(first)")
            #expect(agents?.contentHash.count == 64 && agents?.sourcePath == "" && agents?.sizeBytes == 16)

            // A source of the user's, added twice (the lexical path both times), then resolved.
            try FileManager.default.createDirectory(atPath: home.root + "/notes", withIntermediateDirectories: true)
            try TestFile.write(home.root + "/notes/CLAUDE.md", "be brief\n", atomically: true)
            #expect(try await client.addContextSource("~/notes/") == home.root + "/notes")
            #expect(try await client.addContextSource(home.root + "/notes/.") == home.root + "/notes")
            #expect(try await client.contextSources() == [home.root + "/notes"])
            #expect(try await client.contextSource(home.root + "//notes") == home.root + "/notes")
            let second = try await client.resyncContext()
            #expect(second.version > first.version)
            let notes = second.resources.first { $0.id == "instruction_file:\(home.root)/notes/CLAUDE.md" }
            #expect(notes?.sourcePath == home.root + "/notes", "\(second)")
            // The current snapshot, without a new resolve (a watcher burst may have added one).
            let current = try await client.contextSnapshot()
            #expect(current.version >= second.version && current.resources.contains { $0.id == notes?.id }, "\(current)")

            try await client.removeContextSource("~/notes")
            #expect(try await client.contextSources() == [])
        }
    }

    @Test func errorsCarryTheReferenceTexts() async throws {
        let home = try Home()
        try await withManager(home) { client, _ in
            let missing = home.root + "/nothing"
            #expect(await failure { _ = try await client.contextSource(missing) } == "\"\(missing)\": context source not found")
            // A path with no lexical form is not a registered one either.
            #expect(await failure { _ = try await client.contextSource("notes") } == "\"notes\": context source not found")
            #expect(await failure { try await client.removeContextSource(missing) } == "\"\(missing)\": context source not found")
            #expect(
                await failure { try await client.removeContextSource("notes") }
                    == "remove context source: canonicalize: path \"notes\" is not absolute")
            #expect(
                await failure { _ = try await client.addContextSource("notes") }
                    == "add context source: canonicalize: path \"notes\" is not absolute")
            #expect(await failure { _ = try await client.addContextSource("") } == "add context source: canonicalize: path is empty")
            #expect(
                await failure { _ = try await client.addContextSource("/etc") }
                    == "add context source: path \"/etc\" is not inside any allowed root")
            let long = "/" + String(repeating: "a", count: AgentSocketService.maxContextPathBytes)
            #expect(
                await failure { _ = try await client.addContextSource(long) }
                    == "add context source: path of 4097 bytes is longer than 4096 bytes")
            #expect(await failure { _ = try await client.contextSource(long) } == "path of 4097 bytes is longer than 4096 bytes")
            let sources = try await client.contextSources()
            #expect(sources == [])
        }
    }

    @Test func aSnapshotIsCutToTheAnswerBudget() {
        let resources = (0..<10).map { index in
            ContextResource(kind: .instructionFile, source: "/home/u/p\(index)/AGENTS.md", description: String(repeating: "d", count: 100))
        }
        let snapshot = ContextSnapshot(version: 3, resources: resources)
        let whole = AgentSocketService.wire(snapshot)
        #expect(whole.resources.count == 10 && whole.snapshotError.isEmpty)
        let cut = AgentSocketService.wire(snapshot, budget: 500)
        #expect(cut.resources.count > 0 && cut.resources.count < 10)
        #expect(cut.snapshotError == "snapshot lists \(cut.resources.count) of 10 resources")
        #expect(cut.version == 3 && cut.aggregateHash == whole.aggregateHash)
    }
}
