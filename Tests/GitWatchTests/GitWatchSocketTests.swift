import AgentCore
import AgentHTTP
import AgentTestSupport
import Foundation
import GitWatch
import Hummingbird
import Logging
import ServiceLifecycle
import Testing

/// The watch socket over a real server, real repositories and a real WebSocket client.
@Suite(.timeLimit(.minutes(3)))
struct GitWatchSocketTests {
    static let chat = WatchHarness.chat

    @Test func changesRefreshErrorsAndRemoval() async throws {
        let root = try await GitSnapshotterTests.makeRepository()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try TestFile.write(root + "/f.txt", "hello\n".utf8)
        try await GitSnapshotterTests.git(["add", "."], in: root)
        try await GitSnapshotterTests.git(["commit", "-q", "-m", "init"], in: root)
        try TestFile.write(root + "/f.txt", "hello world\n".utf8)

        let paths = ChatPaths()
        paths.record(root + "/f.txt", chat: Self.chat)
        let context = AgentContext.forTests(chatPaths: paths, stateDirectory: root)
        try await withAgentServer([HTTPMount(GitWatchModule(context: context), at: "/api/v0/git")]) { port in
            try await TestWebSocket.withConnection(port: port, path: "/api/v0/git/watch?chat_id=\(Self.chat)") { ws in
                func nextJSON() async throws -> [String: Any] {
                    guard case .text(let text)? = try await ws.next() else { return [:] }
                    return (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
                }
                let first = try await nextJSON()
                #expect(first["type"] as? String == "changes")
                let repos = try #require(first["repositories"] as? [[String: Any]])
                #expect(repos.first?["branch"] as? String == "main")
                #expect((repos.first?["unified_diff"] as? String)?.contains("+hello world") == true)

                try await ws.send(opcode: 1, payload: Array(#"{"type":"nope"}"#.utf8))
                // A scan that was under way may send its changes first: skip (at most 5) to the error.
                var error = try await nextJSON()
                for _ in 0..<5 where error["type"] as? String == "changes" { error = try await nextJSON() }
                #expect(error["type"] as? String == "error" && error["message"] as? String == "unknown message type")

                try TestFile.write(root + "/f.txt", "hello again\n".utf8)
                try await ws.send(opcode: 1, payload: Array(#"{"type":"refresh"}"#.utf8))
                var updated: [String: Any] = [:]
                for _ in 0..<5 {
                    updated = try await nextJSON()
                    if updated["repositories"] != nil { break }
                }
                #expect(((updated["repositories"] as? [[String: Any]])?.first?["unified_diff"] as? String)?.contains("+hello again") == true)

                try FileManager.default.removeItem(atPath: root + "/.git")
                try await ws.send(opcode: 1, payload: Array(#"{"type":"refresh"}"#.utf8))
                var removed: [String: Any] = [:]
                for _ in 0..<5 {
                    removed = try await nextJSON()
                    if removed["repositories"] != nil { break }
                }
                #expect((removed["repositories"] as? [[String: Any]])?.first?["removed"] as? Bool == true)
                try await ws.close()
            }
        }
    }

    /// At shutdown the module's service closes every watch socket with 1001 (GoingAway).
    @Test func shutdownClosesWithGoingAway() async throws {
        let context = AgentContext.forTests()
        let module = GitWatchModule(context: context)
        let (ports, sink) = AsyncStream<Int>.makeStream()
        let app = AgentHTTPServer.makeApplication(
            address: BindTarget(kind: .tcp(host: "127.0.0.1", port: 0)),
            mounts: [HTTPMount(module, at: "/api/v0/git")],
            headTimeout: testServerHeadTimeout,
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        ) { channel in
            sink.yield(channel.localAddress?.port ?? 0)
            sink.finish()
        }
        let services = ServiceGroup(
            configuration: .init(
                services: module.services.map(\.service), logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.run() }
            group.addTask { try await services.run() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            let code = try await TestWebSocket.withConnection(port: port, path: "/api/v0/git/watch") { ws -> Int? in
                try await Task.sleep(for: .milliseconds(100))
                await services.triggerGracefulShutdown()
                while try await ws.next() != nil {}
                return ws.closeCode
            }
            #expect(code == 1001)
            group.cancelAll()
        }
    }

    /// Beyond the reference: a recorded directory inside no repository has the repositories
    /// directly below it watched (projects cloned into the working directory).
    @Test func repositoriesOneLevelBelowARecordedDirectoryAreWatched() async throws {
        let parent = NSTemporaryDirectory() + "git-parent-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: parent) }
        for name in ["alpha", "beta"] {
            let root = parent + "/" + name
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            try await GitSnapshotterTests.git(["init", "-q"], in: root)
            try TestFile.write(root + "/readme.txt", "\(name)\n".utf8)
        }
        try FileManager.default.createDirectory(atPath: parent + "/not-a-repo", withIntermediateDirectories: true)
        let paths = ChatPaths()
        paths.record(parent, chat: Self.chat)
        let context = AgentContext.forTests(chatPaths: paths, stateDirectory: parent)
        try await withAgentServer([HTTPMount(GitWatchModule(context: context), at: "/api/v0/git")]) { port in
            try await TestWebSocket.withConnection(port: port, path: "/api/v0/git/watch?chat_id=\(Self.chat)") { ws in
                guard case .text(let text)? = try await ws.next() else {
                    Issue.record("no changes message")
                    return
                }
                let json = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
                let roots = ((json?["repositories"] as? [[String: Any]]) ?? []).compactMap { $0["repo_root"] as? String }
                #expect(roots.map { ($0 as NSString).lastPathComponent }.sorted() == ["alpha", "beta"])
                try await ws.close()
            }
        }
    }
}
