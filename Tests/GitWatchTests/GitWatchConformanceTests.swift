import AgentCore
import AgentHTTP
import AgentTestSupport
import Foundation
import GitWatch
import Testing

/// The reference's behaviour, the checks that run on the agent side, through the watch socket.
@Suite(.timeLimit(.minutes(3)))
struct GitWatchConformanceTests {
    static let fast = WatchTiming(poll: .seconds(30), cooldown: .milliseconds(100))

    /// Bogus, relative and outside paths add nothing; 499 bogus paths and one
    /// good one make exactly one repository; with nothing watched, a scan sends nothing.
    @Test func bogusPathsAddNothingAndNoRootsSendNothing() async throws {
        let root = try await WatchHarness.committedRepository()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let paths = ChatPaths(maxPathsPerChat: 1024)
        paths.record("relative/path.txt", chat: WatchHarness.chat)
        for index in 0..<499 { paths.record("/nonexistent-\(index)/file.go", chat: WatchHarness.chat) }
        paths.record(root + "/f.txt", chat: WatchHarness.chat)
        let module = GitWatchModule(context: WatchHarness.context(paths), timing: Self.fast)
        try await WatchHarness.withSocket(module) { client in
            let repositories = try await client.nextRepositories()
            #expect(repositories.compactMap { $0["repo_root"] as? String } == [root])
        }

        let empty = GitWatchModule(context: WatchHarness.context(ChatPaths()), timing: Self.fast)
        try await WatchHarness.withSocket(empty) { client in
            try await client.send(#"{"type":"refresh"}"#)
            try await client.send(#"{"type":"subscribe"}"#)
            let first = try await client.next()
            #expect(first?["type"] as? String == "error", "no heartbeat without roots")
            #expect((first?["message"] as? String)?.contains("unknown") == true)
        }
    }

    /// A deep file maps to its repository; an inner repository nested
    /// in an outer one is its own root; two repositories arrive in one message.
    @Test func deepFilesNestedRepositoriesAndTwoRootsInOneMessage() async throws {
        let outer = try await WatchHarness.committedRepository(["top.txt": "top\n"])
        defer { try? FileManager.default.removeItem(atPath: outer) }
        let inner = outer + "/vendor/inner"
        try FileManager.default.createDirectory(atPath: inner, withIntermediateDirectories: true)
        try await GitSnapshotterTests.git(["init", "-q"], in: inner)
        try TestFile.write(inner + "/x.txt", "deep\n".utf8)
        let other = try await WatchHarness.committedRepository()
        defer { try? FileManager.default.removeItem(atPath: other) }
        try FileManager.default.createDirectory(atPath: other + "/a/b/c", withIntermediateDirectories: true)
        try TestFile.write(other + "/a/b/c/deep.go", "package deep\n".utf8)

        let paths = ChatPaths()
        paths.record(inner + "/x.txt", chat: WatchHarness.chat)
        paths.record(other + "/a/b/c/deep.go", chat: WatchHarness.chat)
        let module = GitWatchModule(context: WatchHarness.context(paths), timing: Self.fast)
        try await WatchHarness.withSocket(module) { client in
            let repositories = try await client.nextRepositories()
            let roots = repositories.compactMap { $0["repo_root"] as? String }.sorted()
            #expect(roots == [inner, other].sorted(), "one message, the inner root and not the outer")
            let deep = repositories.first { $0["repo_root"] as? String == other }
            #expect(deep?.diff.contains("a/b/c/deep.go") == true)
        }
    }

    /// A deleted repository, a deleted `.git`, and a linked worktree whose
    /// administrative directory is deleted are each removed once, and not reported again.
    @Test func removals() async throws {
        let main = try await WatchHarness.committedRepository()
        defer { try? FileManager.default.removeItem(atPath: main) }
        let worktree = main + "-wt"
        try await GitSnapshotterTests.git(["worktree", "add", "-q", worktree, "-b", "wt"], in: main)
        defer { try? FileManager.default.removeItem(atPath: worktree) }
        let doomed = try await WatchHarness.committedRepository()
        defer { try? FileManager.default.removeItem(atPath: doomed) }

        let paths = ChatPaths()
        for path in [worktree, doomed] { paths.record(path + "/f.txt", chat: WatchHarness.chat) }
        let module = GitWatchModule(context: WatchHarness.context(paths), timing: Self.fast)
        try await WatchHarness.withSocket(module) { client in
            #expect(try await client.nextRepositories().count == 2)
            try FileManager.default.removeItem(atPath: main + "/.git/worktrees/" + (worktree as NSString).lastPathComponent)
            let gone = try await client.awaitEntry { $0["removed"] as? Bool == true }
            #expect(gone?["repo_root"] as? String == worktree)
            #expect(gone?["branch"] == nil && gone?["unified_diff"] == nil, "a removal carries only repo_root")

            try FileManager.default.removeItem(atPath: doomed)
            let deleted = try await client.awaitEntry { $0["removed"] as? Bool == true }
            #expect(deleted?["repo_root"] as? String == doomed)
            try await client.send(#"{"type":"refresh"}"#)
            // With no roots left nothing more is sent; the next message is the error reply.
            try await client.send(#"{"type":"x"}"#)
            #expect(try await client.next()?["type"] as? String == "error")
        }
    }

    /// A corrupt HEAD is not a removal, and sends nothing for the repository (it was read
    /// as an unborn branch: every committed file as new); after the repair and a new file,
    /// the repository is reported again.
    @Test func aCorruptHeadStaysWatched() async throws {
        let root = try await WatchHarness.committedRepository()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let paths = ChatPaths()
        paths.record(root, chat: WatchHarness.chat)
        let module = GitWatchModule(context: WatchHarness.context(paths), timing: Self.fast)
        try await WatchHarness.withSocket(module) { client in
            _ = try await client.nextRepositories()
            let head = try String(contentsOfFile: root + "/.git/HEAD", encoding: .utf8)
            try TestFile.write(root + "/.git/HEAD", "garbage\n".utf8)
            try await client.send(#"{"type":"refresh"}"#)
            // A heartbeat: no removal, no entry.
            for _ in 0..<3 {
                let message = try await client.next()
                #expect(message?["repositories"] == nil, "\(String(describing: message))")
                if message?["repositories"] == nil { break }
            }
            try TestFile.write(root + "/.git/HEAD", head.utf8)
            try TestFile.write(root + "/new.txt", "after repair\n".utf8)
            let repaired = try await client.awaitEntry { $0.diff.contains("+after repair") }
            #expect(repaired != nil)
            #expect(repaired?.diff.contains("f.txt") == false, "the committed file is not new")
        }
    }

    /// Two sockets for one chat each get their own first `changes`; a chat's
    /// socket never shows another chat's repository.
    @Test func twoSocketsForOneChatAndChatsAreApart() async throws {
        let mine = try await WatchHarness.committedRepository()
        let theirs = try await WatchHarness.committedRepository()
        defer {
            try? FileManager.default.removeItem(atPath: mine)
            try? FileManager.default.removeItem(atPath: theirs)
        }
        let other = "0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9"
        let paths = ChatPaths()
        paths.record(mine, chat: WatchHarness.chat)
        paths.record(theirs, chat: other)
        let module = GitWatchModule(context: WatchHarness.context(paths), timing: Self.fast)
        try await withAgentServer([HTTPMount(module, at: "/api/v0/git")]) { port in
            let path = "/api/v0/git/watch?chat_id=\(WatchHarness.chat)"
            try await TestWebSocket.withConnection(port: port, path: path) { first in
                try await TestWebSocket.withConnection(port: port, path: path) { second in
                    var a = WatchClient(ws: first)
                    var b = WatchClient(ws: second)
                    let roots = [try await a.nextRepositories(), try await b.nextRepositories()].map { $0.compactMap { $0["repo_root"] as? String } }
                    #expect(roots == [[mine], [mine]])
                    try await a.ws.close()
                    try await b.ws.close()
                }
            }
        }
    }

    /// 100 files of 50 KiB go over the 3 MiB cap: the diff is cut at a file boundary
    /// with `diff_truncated`, and branch and origin are still sent.
    @Test func theCapThroughTheSocket() async throws {
        let root = try await WatchHarness.committedRepository()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try await GitSnapshotterTests.git(["remote", "add", "origin", "https://example.invalid/r.git"], in: root)
        let line = String(repeating: "z", count: 99) + "\n"
        for index in 0..<100 {
            try TestFile.write(root + String(format: "/big-%03d.txt", index), String(repeating: line, count: 512).utf8)
        }
        let paths = ChatPaths()
        paths.record(root, chat: WatchHarness.chat)
        let module = GitWatchModule(context: WatchHarness.context(paths), timing: Self.fast)
        try await WatchHarness.withSocket(module) { client in
            let entry = try #require(try await client.nextRepositories().first)
            #expect(entry["diff_truncated"] as? Bool == true)
            #expect(entry["branch"] as? String == "main")
            #expect(entry["remote_origin"] as? String == "https://example.invalid/r.git")
            let diff = entry.diff
            #expect(diff.utf8.count <= GitSnapshotter.maxDiffBytes && diff.hasSuffix("\n"))
            // Each file's diff is 512 lines of 101 bytes plus its header (51.8 KiB): 60 fit.
            let files = diff.components(separatedBy: "diff --git ").count - 1
            #expect(files == 60 && diff.utf8.count / files * (files + 1) > GitSnapshotter.maxDiffBytes, "whole files only")
        }
    }

    /// Ignored files (`*.log`, `build/`) are absent, and a nested `.gitignore` with
    /// `!*` under an ignored `node_modules/` does not bring its files back; git agrees.
    @Test func nestedNegationUnderAnIgnoredDirectory() async throws {
        let root = try await WatchHarness.committedRepository([".gitignore": "*.log\nbuild/\nnode_modules/\n"])
        defer { try? FileManager.default.removeItem(atPath: root) }
        for (path, text) in [
            "node_modules/pkg/.gitignore": "!*\n", "node_modules/pkg/index.js": "x\n", "build/out.o": "o\n", "debug.log": "l\n",
            "src/main.go": "package main\n",
        ] {
            try FileManager.default.createDirectory(atPath: ((root + "/" + path) as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try TestFile.write(root + "/" + path, text.utf8)
        }
        let diff = try GitSnapshotter.snapshot(root: root).unifiedDiff
        #expect(diff.contains("src/main.go"))
        for hidden in ["node_modules", "out.o", "debug.log"] { #expect(!diff.contains(hidden)) }
        let status = try await GitSnapshotterTests.git(["status", "--porcelain", "--untracked-files=all"], in: root)
        #expect(status == "?? src/main.go\n")
    }

    /// A path recorded after connecting brings its repository;
    /// the tick alone scans and sends a heartbeat (no repositories, a non-decreasing
    /// `scanned_at`); reverting the only dirty file sends an entry whose diff no longer
    /// names it; a second repository recorded later arrives.
    @Test func laterPathsHeartbeatsAndReverts() async throws {
        let root = try await WatchHarness.committedRepository()
        let second = try await WatchHarness.committedRepository()
        defer {
            try? FileManager.default.removeItem(atPath: root)
            try? FileManager.default.removeItem(atPath: second)
        }
        try TestFile.write(root + "/f.txt", "dirty\n".utf8)
        let paths = ChatPaths()
        let timing = WatchTiming(poll: .milliseconds(200), cooldown: .milliseconds(50))
        let module = GitWatchModule(context: WatchHarness.context(paths), timing: timing)
        try await WatchHarness.withSocket(module) { client in
            paths.record(root + "/f.txt", chat: WatchHarness.chat)
            let first = try #require(try await client.awaitEntry { $0["repo_root"] as? String == root })
            #expect(first.diff.contains("+dirty"))

            var stamps: [String] = []
            for _ in 0..<10 where stamps.count < 2 {
                guard let message = try await client.next() else { break }
                if message["repositories"] == nil, let stamp = message["scanned_at"] as? String { stamps.append(stamp) }
            }
            #expect(stamps.count == 2 && stamps[0] <= stamps[1], "heartbeats on the tick, time moving forward")

            try await GitSnapshotterTests.git(["checkout", "--", "f.txt"], in: root)
            // A scan that raced the checkout may report a state on the way first; the clean
            // tree must follow.
            let reverted = try await client.awaitEntry { $0["repo_root"] as? String == root && $0.diff.isEmpty }
            #expect(reverted != nil, "the reverted file's empty diff arrives")

            paths.record(second, chat: WatchHarness.chat)
            #expect(try await client.awaitEntry { $0["repo_root"] as? String == second } != nil)
        }
    }
}
