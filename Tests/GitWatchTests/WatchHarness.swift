import AgentCore
import AgentHTTP
import AgentTestSupport
import Foundation
import GitWatch
import Testing

/// A git watch module over a real server and a real WebSocket client, for the socket tests.
enum WatchHarness {
    static let chat = "7a6b5c4d-3e2f-4a1b-9c8d-7e6f5a4b3c2d"

    static func context(_ paths: ChatPaths, state: String = NSTemporaryDirectory()) -> AgentContext {
        AgentContext.forTests(chatPaths: paths, stateDirectory: state)
    }

    /// Serves `module` and opens one watch socket for `chat`.
    static func withSocket(
        _ module: GitWatchModule, chat: String = chat, _ body: (inout WatchClient) async throws -> Void
    ) async throws {
        try await withAgentServer([HTTPMount(module, at: "/api/v0/git")]) { port in
            try await TestWebSocket.withConnection(port: port, path: "/api/v0/git/watch?chat_id=\(chat)") { ws in
                var client = WatchClient(ws: ws)
                try await body(&client)
                try await client.ws.close()
            }
        }
    }

    /// Runs a shell command as a separate process (an edit the agent did not make).
    static func shell(_ command: String, in directory: String) async {
        _ = await ChildProgram.run(["/bin/sh", "-c", command], directory: directory)
    }

    /// A repository with `files` committed on `main`.
    static func committedRepository(_ files: [String: String] = ["f.txt": "hello\n"]) async throws -> String {
        let root = try await GitSnapshotterTests.makeRepository()
        for (name, text) in files {
            let path = root + "/" + name
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try TestFile.write(path, text.utf8)
        }
        try await GitSnapshotterTests.git(["add", "."], in: root)
        try await GitSnapshotterTests.git(["commit", "-q", "-m", "init"], in: root)
        return URL(fileURLWithPath: root).resolvingSymlinksInPath().path
    }
}

/// One watch socket's messages, decoded.
struct WatchClient {
    var ws: TestWebSocket

    /// The next message as JSON; nil once the socket closed.
    mutating func next() async throws -> [String: Any]? {
        guard case .text(let text)? = try await ws.next() else { return nil }
        return (try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
    }

    /// The repositories of the next `changes` that carries any (heartbeats skipped; at most
    /// `limit` messages read).
    mutating func nextRepositories(limit: Int = 40) async throws -> [[String: Any]] {
        for _ in 0..<limit {
            guard let message = try await next() else { return [] }
            if let repositories = message["repositories"] as? [[String: Any]] { return repositories }
        }
        return []
    }

    /// Reads `changes` until one's entry for a repository satisfies `match`.
    mutating func awaitEntry(limit: Int = 40, _ match: ([String: Any]) -> Bool) async throws -> [String: Any]? {
        for _ in 0..<limit {
            for entry in try await nextRepositories(limit: limit) where match(entry) { return entry }
        }
        return nil
    }

    func send(_ text: String) async throws { try await ws.send(opcode: 1, payload: Array(text.utf8)) }
}

extension [String: Any] {
    var diff: String { self["unified_diff"] as? String ?? "" }
}
