import AgentCore
import AgentTestSupport
import Foundation
import Logging
import Glibc
import Synchronization
import Testing

@testable import GitWatch

/// The inotify watcher on its own: generations, signals, the budget, and its thread's life.
@Suite(.timeLimit(.minutes(3)))
struct TreeWatcherTests {
    @Test func eventsMoveTheGenerationAndTheThreadEndsWithTheLastRepository() async throws {
        let root = try await WatchHarness.committedRepository(["a/b/f.txt": "x\n"])
        defer { try? FileManager.default.removeItem(atPath: root) }
        let watcher = TreeWatcher()
        let signal = WorkSignal()
        let subscription = await watcher.subscribe(root: root, signal: signal)
        #expect(watcher.isRunning)
        let before = watcher.status(of: root)
        #expect(before.live)

        // A tracked file deep in the tree moves it and wakes the subscriber.
        try TestFile.write(root + "/a/b/f.txt", "y\n".utf8)
        await signal.wait()
        #expect(await eventually { watcher.status(of: root).generation > before.generation })
        let moved = watcher.status(of: root).generation

        // A second subscriber shares the watches; the thread stays until both leave.
        let other = await watcher.subscribe(root: root, signal: WorkSignal())
        watcher.unsubscribe(subscription)
        #expect(watcher.isRunning)
        watcher.unsubscribe(other)
        #expect(await eventually { !watcher.isRunning }, "the thread ends with the last repository")
        #expect(watcher.status(of: root) == TreeWatcher.Status(generation: 0, live: false))

        // And starts again for the next one, at a generation not handed out before (a
        // scanner or the shared cache may hold one from the first watch).
        let again = await watcher.subscribe(root: root, signal: WorkSignal())
        #expect(watcher.isRunning && watcher.status(of: root).live)
        #expect(watcher.status(of: root).generation > moved)
        watcher.unsubscribe(again)
        #expect(await eventually { !watcher.isRunning })
    }

    /// A scan that ran while a new repository's watches were being built (the scanner's
    /// actor is reentrant while it subscribes) recorded the generation the repository had
    /// then, and the repository became ready at that same generation: an edit made before
    /// the watches were in place passed for seen and was never sent. The watcher's thread is
    /// held before it builds the watches, so the order is fixed, not raced.
    @Test func anEditWhileTheWatchesAreBuiltIsNotLostToAScanMadeMeanwhile() async throws {
        let root = try await WatchHarness.committedRepository()
        defer { try? FileManager.default.removeItem(atPath: root) }
        // A turnstile: closed until signalled once, then open for good.
        let turnstile = DispatchSemaphore(value: 0)
        defer { turnstile.signal() }
        let watcher = TreeWatcher(
            maxWatches: 8192,
            beforeRound: {
                turnstile.wait()
                turnstile.signal()
            })
        let scanner = WatchScanner(watcher: watcher, signal: WorkSignal())
        let resolving = Task { await scanner.resolve([root + "/f.txt"]) }
        // Registered, its watches not built yet (the thread waits at the turnstile).
        #expect(await eventually { watcher.status(of: root).generation != 0 })
        #expect(!watcher.status(of: root).live)
        let first = await scanner.scan(.events)
        #expect(first?.changed.first?.unifiedDiff == "")
        try TestFile.write(root + "/f.txt", "edited before the watches were in place\n".utf8)
        turnstile.signal()
        await resolving.value
        #expect(watcher.status(of: root).live)
        let second = await scanner.scan(.events)
        #expect(
            second?.changed.first?.unifiedDiff?.contains("+edited before the watches were in place") == true,
            "\(String(describing: second))")
    }

    /// A repository of 20 directories (23 watches with its .git and refs/heads).
    static var twentyDirectories: [String: String] {
        Dictionary(uniqueKeysWithValues: (0..<20).map { ("d\($0)/f.txt", "\($0)\n") })
    }

    @Test func aRepositoryOverTheBudgetIsNotLiveAndOthersStillAre() async throws {
        let small = try await WatchHarness.committedRepository()
        let large = try await WatchHarness.committedRepository(Self.twentyDirectories)
        defer {
            try? FileManager.default.removeItem(atPath: small)
            try? FileManager.default.removeItem(atPath: large)
        }
        // The small repository needs its root, .git and refs/heads; the large one 23.
        let watcher = TreeWatcher(maxWatches: 10)
        let first = await watcher.subscribe(root: small, signal: WorkSignal())
        let second = await watcher.subscribe(root: large, signal: WorkSignal())
        #expect(watcher.status(of: small).live)
        #expect(!watcher.status(of: large).live, "polled: its directories do not fit")
        watcher.unsubscribe(first)
        watcher.unsubscribe(second)
        #expect(await eventually { !watcher.isRunning })
    }
}

/// A repository that did not fit the budget is tried again only once the freed budget
/// covers what it held when it ran out: a small repository watched and let go again and
/// again made it walk up to the whole budget each time, on the watcher's one thread.
struct TreeWatchEngineBudgetTests {
    @Test func anOverBudgetRepositoryIsNotRebuiltOnEverySmallRelease() async throws {
        let small = try await WatchHarness.committedRepository()
        let large = try await WatchHarness.committedRepository(TreeWatcherTests.twentyDirectories)
        defer {
            try? FileManager.default.removeItem(atPath: small)
            try? FileManager.default.removeItem(atPath: large)
        }
        let engine = TreeWatchEngine(maxWatches: 10, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        engine.add(root: large)
        #expect(!engine.isLive(large))
        let before = engine.builds
        for _ in 0..<20 {
            engine.add(root: small)
            #expect(engine.isLive(small))
            engine.remove(root: small)
        }
        #expect(engine.builds - before == 20, "only the small repository's own walks: \(engine.builds - before)")
        engine.remove(root: large)
    }

    /// A repository over the budget waits for as many free watches as it held of its own,
    /// plus one: not for the directories it shares with another repository (a linked
    /// worktree and its main repository share the git directory and refs), which a rebuild
    /// does not watch anew. Before, those counted and it stayed polled longer than it must.
    @Test func sharedDirectoriesAreNotCountedInWhatAnOverBudgetRepositoryNeeds() async throws {
        var files: [String: String] = [:]
        for index in 0..<20 { files["d\(index)/f.txt"] = "\(index)\n" }
        let main = try await WatchHarness.committedRepository(files)
        let worktree = main + "-worktree"
        defer {
            try? FileManager.default.removeItem(atPath: main)
            try? FileManager.default.removeItem(atPath: worktree)
        }
        _ = try await GitSnapshotterTests.git(["worktree", "add", "-q", worktree], in: main)
        try #require(FileManager.default.fileExists(atPath: worktree + "/d0/f.txt"))
        let engine = TreeWatchEngine(maxWatches: 40, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        engine.add(root: main)
        #expect(engine.isLive(main))
        let mainWatches = engine.watchCount
        engine.add(root: worktree)
        #expect(!engine.isLive(worktree), "over the budget")
        // It filled the budget with watches of its own before it ran out.
        #expect(engine.neededWatches(worktree) == 40 - mainWatches + 1, "\(String(describing: engine.neededWatches(worktree))), main \(mainWatches)")
        engine.remove(root: worktree)
        engine.remove(root: main)
    }
}

/// What a reviewer found the watcher missed, each now seen (or polled).
@Suite(.timeLimit(.minutes(3)))
struct TreeWatcherCoverageTests {
    /// Subscribes, runs `change`, and says whether the generation moved (bounded wait).
    static func moves(_ root: String, watcher: TreeWatcher = TreeWatcher(), _ change: () async throws -> Void) async throws -> Bool {
        let subscription = await watcher.subscribe(root: root, signal: WorkSignal())
        defer { watcher.unsubscribe(subscription) }
        let before = watcher.status(of: root)
        try await change()
        // Generous: milliseconds of work have taken over 10 s on a loaded host.
        return await eventually(timeout: .seconds(20)) { watcher.status(of: root).generation > before.generation }
    }

    @Test func trackedFilesUnderIgnoreRulesAreWatched() async throws {
        let root = try await WatchHarness.committedRepository([".gitignore": "build/\n*.log\n"])
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/build", withIntermediateDirectories: true)
        try TestFile.write(root + "/build/keep.txt", "kept\n".utf8)
        try TestFile.write(root + "/app.log", "log\n".utf8)
        try await GitSnapshotterTests.git(["add", "-f", "build/keep.txt", "app.log"], in: root)
        try await GitSnapshotterTests.git(["commit", "-q", "-m", "forced"], in: root)
        #expect(try await Self.moves(root) { try TestFile.write(root + "/build/keep.txt", "edited\n".utf8) })
        #expect(try await Self.moves(root) { try TestFile.write(root + "/app.log", "edited\n".utf8) })
    }

    @Test func infoExcludeEditsAreSeen() async throws {
        let root = try await WatchHarness.committedRepository()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try TestFile.write(root + "/.git/info/exclude", "x.txt\n".utf8)
        try TestFile.write(root + "/x.txt", "x\n".utf8)
        #expect(try await Self.moves(root) { try TestFile.write(root + "/.git/info/exclude", "".utf8) })
    }

    @Test func repositoriesWithSubmodulesOrUnwatchableNamesArePolled() async throws {
        let inner = try await WatchHarness.committedRepository()
        let outer = try await WatchHarness.committedRepository()
        defer {
            try? FileManager.default.removeItem(atPath: inner)
            try? FileManager.default.removeItem(atPath: outer)
        }
        try await GitSnapshotterTests.git(["-c", "protocol.file.allow=always", "submodule", "add", "-q", inner, "sub"], in: outer)
        let watcher = TreeWatcher()
        let first = await watcher.subscribe(root: outer, signal: WorkSignal())
        #expect(!watcher.status(of: outer).live, "a repository with submodules is polled")
        watcher.unsubscribe(first)

        let odd = try await WatchHarness.committedRepository()
        defer { try? FileManager.default.removeItem(atPath: odd) }
        // A directory whose name is not UTF-8.
        var path = Array((odd + "/bad").utf8CString.dropLast().map { UInt8(bitPattern: $0) })
        path += [0xFF, 0]
        _ = path.withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { mkdir($0.baseAddress!, 0o755) } }
        let second = await watcher.subscribe(root: odd, signal: WorkSignal())
        #expect(!watcher.status(of: odd).live, "a name that is not UTF-8: polled")
        watcher.unsubscribe(second)
    }
}

/// How a watched repository is found gone, against what a workspace process can put at its
/// `.git`.
struct RepositoryFinderTests {
    /// A FIFO at `.git` is not read (its open for reading had waited for a writer for ever,
    /// on one of git watching's two threads); the repository is not gone, and the look returns.
    @Test func aFIFOAtDotGitIsNotRead() async throws {
        let root = NSTemporaryDirectory() + "finder-fifo-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        try #require(mkfifo(root + "/.git", 0o600) == 0)
        let done = Mutex<Bool?>(nil)
        // On a thread of its own: a look that blocks must not hold the test's pool.
        Thread { done.withLock { $0 = RepositoryFinder.isGone(root) } }.start()
        #expect(await eventually(timeout: .seconds(30)) { done.withLock { $0 } != nil }, "the look returned")
        #expect(done.withLock { $0 } == false)
        // A worktree's `.git` file naming a git directory that is missing: gone.
        try FileManager.default.removeItem(atPath: root + "/.git")
        try TestFile.write(root + "/.git", "gitdir: /nonexistent/worktrees/x\n".utf8)
        #expect(RepositoryFinder.isGone(root))
    }
}
