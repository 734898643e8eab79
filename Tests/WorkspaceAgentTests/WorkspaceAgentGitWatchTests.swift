import AgentTestSupport
import Foundation
import Testing

/// The git watcher in the real binary: a watch socket sees a tool call's edit (recorded for
/// the chat's parent through the ancestor header), a plain shell edit, and, after a restart
/// on the same state directory, the same repository again; tracked diffs equal git's own.
@Suite(.timeLimit(.minutes(3)))
struct WorkspaceAgentGitWatchTests {
    static let parent = "1f2e3d4c-5b6a-4789-9abc-def012345678"
    static let child = "2a3b4c5d-6e7f-4801-92a3-b4c5d6e7f809"

    @discardableResult
    static func git(_ arguments: [String], in directory: String) async -> String {
        await GitCLI.run(arguments, in: directory)
    }

    /// The first `changes` entry for `root` that satisfies `match` (bounded reads).
    static func entry(_ ws: inout TestWebSocket, root: String, _ match: (String) -> Bool) async throws -> String? {
        for _ in 0..<40 {
            guard case .text(let text)? = try await ws.next() else { return nil }
            let json = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
            for repository in (json?["repositories"] as? [[String: Any]]) ?? [] where repository["repo_root"] as? String == root {
                let diff = repository["unified_diff"] as? String ?? ""
                if match(diff) { return diff }
            }
        }
        return nil
    }

    @Test func toolCallsShellEditsAndRestarts() async throws {
        let state = NSTemporaryDirectory() + "agent-state-\(UUID().uuidString.prefix(8))"
        let root = NSTemporaryDirectory() + "agent-repo-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer {
            try? FileManager.default.removeItem(atPath: root)
            try? FileManager.default.removeItem(atPath: state)
        }
        await Self.git(["init", "-q"], in: root)
        try TestFile.write(root + "/f.txt", "one\ntwo\nthree\n".utf8)
        await Self.git(["add", "."], in: root)
        await Self.git(["commit", "-q", "-m", "init"], in: root)

        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--state-dir", state])
        defer { agent.cleanup() }
        let port = try await agent.port()
        let client = RawHTTPClient(port: port)
        let chatHeaders = [("Coder-Chat-Id", Self.child), ("Coder-Ancestor-Chat-Ids", "[\"\(Self.parent)\"]")]
        let written = try await client.request(
            "POST", "/api/v0/write-file?path=\(root)/f.txt", headers: chatHeaders, body: Array("one\nTWO\nthree\n".utf8))
        #expect(written.status == 200)

        try await TestWebSocket.withConnection(port: port, path: "/api/v0/git/watch?chat_id=\(Self.parent)") { ws in
            let diff = try await Self.entry(&ws, root: root) { $0.contains("+TWO") }
            #expect(diff == (await Self.git(["diff", "HEAD"], in: root)), "the tool call's edit, as git prints it")
            // A plain shell edit, made by no tool call.
            try TestFile.write(root + "/f.txt", "one\nTWO\nthree\nfour\n".utf8)
            let shell = try await Self.entry(&ws, root: root) { $0.contains("+four") }
            #expect(shell == (await Self.git(["diff", "HEAD"], in: root)))
            try await ws.close()
        }
        agent.signal(SIGTERM)
        #expect(await agent.exitStatus() == 0)

        let second = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--state-dir", state])
        defer { second.cleanup() }
        try await TestWebSocket.withConnection(port: try await second.port(), path: "/api/v0/git/watch?chat_id=\(Self.parent)") { ws in
            #expect(try await Self.entry(&ws, root: root) { $0.contains("+four") } != nil, "the chat's repository survives a restart")
            try await ws.close()
        }
        second.signal(SIGTERM)
        #expect(await second.exitStatus() == 0)
    }

    /// A scan that finds nothing new is a heartbeat of exactly `type` and `scanned_at`
    /// (RFC 3339 UTC), with no `repositories` key, as Coder's agent sends it; and
    /// docs/openapi.yaml's `GitWatchChanges` allows both shapes: `type` and `scanned_at`
    /// required, `repositories` optional.
    @Test func aHeartbeatHasTheDocumentedShape() async throws {
        let root = NSTemporaryDirectory() + "agent-repo-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        await Self.git(["init", "-q"], in: root)
        try TestFile.write(root + "/f.txt", "one\n".utf8)
        await Self.git(["add", "."], in: root)
        await Self.git(["commit", "-q", "-m", "init"], in: root)

        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0"])
        defer { agent.cleanup() }
        let port = try await agent.port()
        let written = try await RawHTTPClient(port: port).request(
            "POST", "/api/v0/write-file?path=\(root)/f.txt", headers: [("Coder-Chat-Id", Self.parent)], body: Array("two\n".utf8))
        #expect(written.status == 200)

        var full: [String: Any]?
        var heartbeat: [String: Any]?
        try await TestWebSocket.withConnection(port: port, path: "/api/v0/git/watch?chat_id=\(Self.parent)") { ws in
            // The first scan reports the repository; a refresh then finds nothing new.
            for _ in 0..<40 where heartbeat == nil {
                guard case .text(let text)? = try await ws.next() else { break }
                let message = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] ?? [:]
                if message["repositories"] != nil {
                    full = message
                    try await ws.send(opcode: 1, payload: Array(#"{"type":"refresh"}"#.utf8))
                } else if full != nil {
                    heartbeat = message
                }
            }
            try await ws.close()
        }
        let changes = try #require(full, "no changes message with the repository")
        let beat = try #require(heartbeat, "no heartbeat after a refresh")
        #expect(Set(changes.keys) == ["type", "scanned_at", "repositories"])
        #expect(Set(beat.keys) == ["type", "scanned_at"], "\(beat)")
        #expect(beat["type"] as? String == "changes")
        let stamp = beat["scanned_at"] as? String ?? ""
        #expect(stamp.range(of: #"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$"#, options: .regularExpression) != nil, "\(stamp)")

        let path = DocExamples.repositoryRoot.appendingPathComponent("docs/openapi.yaml").path
        let script = """
            import json, sys, yaml
            schema = yaml.safe_load(open(sys.argv[1]))["components"]["schemas"].get("GitWatchChanges", {})
            print(json.dumps({"required": schema.get("required", []), "properties": sorted(schema.get("properties", {}))}))
            """
        let outcome = await ChildProgram.run(["/usr/bin/python3", "-c", script, path], stderrToStdout: true)
        try #require(outcome.status == 0, "\(outcome.stdout)")
        let schema = try JSONSerialization.jsonObject(with: Data(outcome.stdout.utf8)) as? [String: [String]] ?? [:]
        let required = Set(schema["required"] ?? [])
        let properties = Set(schema["properties"] ?? [])
        #expect(required == ["type", "scanned_at"], "GitWatchChanges.required: \(required)")
        for message in [changes, beat] {
            #expect(Set(message.keys).isSubset(of: properties), "undocumented keys in \(message.keys.sorted())")
            #expect(required.isSubset(of: Set(message.keys)))
        }
        agent.signal(SIGTERM)
        #expect(await agent.exitStatus() == 0)
    }
}
