import AgentCore
import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
import AgentTestSupport
#endif

// Three minutes: its `.ownThreads` test may wait behind other long ones for one of the two threads.
@Suite(.timeLimit(.minutes(3)))
struct ChatPathsJournalTests {
    static let chatA = "11111111-2222-4333-8444-555555555555"
    static let chatB = "66666666-7777-4888-9999-aaaaaaaaaaaa"

    func directory() throws -> String {
        let path = NSTemporaryDirectory() + "chat-paths-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test func savedPathsComeBackInOrder() throws {
        let file = try directory() + "/state/chat-paths.json"
        let before = ChatPaths()
        before.record("/repo/one", chat: Self.chatA)
        before.record("/repo/two", chat: Self.chatB)
        before.record("/repo/three", chat: Self.chatA)
        ChatPathsJournal(paths: before, file: file).save()
        var info = stat()
        #expect(stat(file, &info) == 0 && info.st_mode & 0o777 == 0o600)

        let after = ChatPaths()
        #expect(ChatPathsJournal(paths: after, file: file).restore() == 3)
        #expect(after.paths(chat: Self.chatA) == ["/repo/one", "/repo/three"])
        #expect(after.paths(chat: Self.chatB) == ["/repo/two"])
        #expect(after.snapshot().map(\.chat) == before.snapshot().map(\.chat), "the least recently touched chat stays first")
    }

    @Test func aTornOrCorruptFileIsIgnored() throws {
        let dir = try directory()
        let messages = Mutex<[String]>([])
        for content in ["{\"version\":1,\"chats\":[{\"id\":\"x\",\"pa", "not json", "{\"version\":2}", ""] {
            let file = dir + "/chat-paths.json"
            try TestFile.write(file, content.utf8)
            let paths = ChatPaths()
            let journal = ChatPathsJournal(paths: paths, file: file) { message in messages.withLock { $0.append(message) } }
            #expect(journal.restore() == 0)
            #expect(paths.chatCount == 0)
        }
        #expect(messages.withLock { $0.count } == 4)
        #expect(messages.withLock { $0.allSatisfy { $0.contains("unreadable or corrupt") } })
    }

    @Test(.ownThreads) func theFileStaysBounded() throws {
        let file = try directory() + "/chat-paths.json"
        let paths = ChatPaths(maxChats: 1024, maxPathsPerChat: 256)
        let long = "/" + String(repeating: "p", count: 4000)
        for chat in 0..<20 {
            for index in 0..<200 { paths.record("\(long)/\(index)", chat: String(format: "chat-%04d", chat)) }
        }
        ChatPathsJournal(paths: paths, file: file).save()
        var info = stat()
        #expect(stat(file, &info) == 0)
        #expect(info.st_size <= ChatPathsJournal.maxFileBytes)
        let restored = ChatPaths()
        ChatPathsJournal(paths: restored, file: file).restore()
        #expect(restored.chatCount > 0 && restored.chatCount < 20, "the chats touched longest ago were left out")
        #expect(restored.paths(chat: "chat-0019").count == 200, "the newest chat is kept whole")
    }

    /// As a service: changes are saved shortly after they happen, and once more at shutdown.
    @Test func theServiceSavesChangesAndAtShutdown() async throws {
        let file = try directory() + "/chat-paths.json"
        let paths = ChatPaths()
        let journal = ChatPathsJournal(paths: paths, file: file)
        let group = ServiceGroup(configuration: .init(services: [journal], logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            try await Task.sleep(for: .milliseconds(50))
            paths.record("/repo/saved-soon", chat: Self.chatA)
            var saved = false
            for _ in 0..<50 where !saved {
                try await Task.sleep(for: .milliseconds(100))
                saved = (try? String(contentsOfFile: file, encoding: .utf8))?.contains("saved-soon") == true
            }
            #expect(saved)
            paths.record("/repo/at-shutdown", chat: Self.chatB)
            await group.triggerGracefulShutdown()
            try await tasks.next()
        }
        #expect(try String(contentsOfFile: file, encoding: .utf8).contains("at-shutdown"))
    }
}
