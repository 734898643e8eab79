import AgentCore
import AgentTestSupport
import Foundation
import GitWatch
import Testing

/// Beyond the reference: edits by any process reach the socket through inotify, without a
/// refresh, a tool call or the poll (the poll here is 30 s and an unchanged generation is
/// trusted, so only an event can deliver them); a tree too large for the watch budget is
/// polled with the fingerprint.
@Suite(.timeLimit(.minutes(3)))
struct GitWatchLiveTests {
    static let slowPoll = WatchTiming(poll: .seconds(30), cooldown: .milliseconds(100))

    @Test func shellEditsNewDirectoriesAndCommitsArriveWithoutPolling() async throws {
        let root = try await WatchHarness.committedRepository()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let paths = ChatPaths()
        paths.record(root + "/f.txt", chat: WatchHarness.chat)
        let module = GitWatchModule(context: WatchHarness.context(paths), timing: Self.slowPoll)
        try await WatchHarness.withSocket(module) { client in
            let first = try await client.nextRepositories()
            #expect(first.first?["repo_root"] as? String == root)
            #expect(first.first?.diff == "")

            await WatchHarness.shell("echo more >> f.txt", in: root)
            let edited = try await client.awaitEntry { $0.diff.contains("+more") }
            #expect(edited != nil, "a shell edit arrives")

            // A directory made after watching began is watched too.
            await WatchHarness.shell("mkdir -p sub/deeper && echo one > sub/deeper/new.txt", in: root)
            #expect(try await client.awaitEntry { $0.diff.contains("sub/deeper/new.txt") } != nil)
            await WatchHarness.shell("echo two >> sub/deeper/new.txt", in: root)
            #expect(try await client.awaitEntry { $0.diff.contains("+two") } != nil, "an untracked file edited again")

            // A commit moves the branch: the diff against the new HEAD is empty.
            try await GitSnapshotterTests.git(["add", "-A"], in: root)
            try await GitSnapshotterTests.git(["commit", "-q", "-m", "second"], in: root)
            #expect(try await client.awaitEntry { $0.diff.isEmpty } != nil, "a commit is seen")

            // A new branch checked out.
            try await GitSnapshotterTests.git(["checkout", "-q", "-b", "feature/x"], in: root)
            #expect(try await client.awaitEntry { $0["branch"] as? String == "feature/x" } != nil)
        }
    }

    @Test func ignoredFilesDoNotWakeTheSocketAndGitignoreEditsDo() async throws {
        let root = try await WatchHarness.committedRepository([".gitignore": "build/\n*.log\n", "f.txt": "x\n"])
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/build", withIntermediateDirectories: true)
        let paths = ChatPaths()
        paths.record(root, chat: WatchHarness.chat)
        let module = GitWatchModule(context: WatchHarness.context(paths), timing: Self.slowPoll)
        try await WatchHarness.withSocket(module) { client in
            _ = try await client.nextRepositories()
            await WatchHarness.shell("echo a > build/out.o && echo b > noise.log", in: root)
            // Un-ignoring *.log is an edit the diff shows, and brings noise.log in.
            // Replaced in one rename: a snapshot between a truncation and the write would
            // see no ignore rules at all (build/out.o included).
            await WatchHarness.shell("echo 'build/' > .gitignore.new && mv .gitignore.new .gitignore", in: root)
            let entry = try await client.awaitEntry { $0.diff.contains("noise.log") }
            #expect(entry?.diff.contains("-*.log") == true)
            #expect(entry?.diff.contains("out.o") == false)
        }
    }

    @Test func aTreeBeyondTheWatchBudgetIsPolledWithTheFingerprint() async throws {
        let root = try await WatchHarness.committedRepository(["a/f.txt": "one\n", "b/g.txt": "two\n"])
        defer { try? FileManager.default.removeItem(atPath: root) }
        let paths = ChatPaths()
        paths.record(root, chat: WatchHarness.chat)
        let timing = WatchTiming(poll: .milliseconds(300), cooldown: .milliseconds(100))
        let module = GitWatchModule(context: WatchHarness.context(paths), timing: timing, maxWatches: 2)
        try await WatchHarness.withSocket(module) { client in
            _ = try await client.nextRepositories()
            await WatchHarness.shell("echo edit >> a/f.txt", in: root)
            #expect(try await client.awaitEntry { $0.diff.contains("+edit") } != nil)
            // The same file edited again: its status does not change, its stamp does.
            await WatchHarness.shell("echo again >> a/f.txt", in: root)
            #expect(try await client.awaitEntry { $0.diff.contains("+again") } != nil)
        }
    }
}
