import AgentCore
import AgentTestSupport
import Foundation
import Testing

@testable import GitWatch

/// The inotify watcher on its own: generations, signals, the budget, and its thread's life.
@Suite(.timeLimit(.minutes(1)))
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
        try Data("y\n".utf8).write(to: URL(fileURLWithPath: root + "/a/b/f.txt"))
        await signal.wait()
        #expect(await eventually { watcher.status(of: root).generation > before.generation })

        // A second subscriber shares the watches; the thread stays until both leave.
        let other = await watcher.subscribe(root: root, signal: WorkSignal())
        watcher.unsubscribe(subscription)
        #expect(watcher.isRunning)
        watcher.unsubscribe(other)
        #expect(await eventually { !watcher.isRunning }, "the thread ends with the last repository")
        #expect(watcher.status(of: root) == TreeWatcher.Status(generation: 0, live: false))

        // And starts again for the next one.
        let again = await watcher.subscribe(root: root, signal: WorkSignal())
        #expect(watcher.isRunning && watcher.status(of: root).live)
        watcher.unsubscribe(again)
        #expect(await eventually { !watcher.isRunning })
    }

    @Test func aRepositoryOverTheBudgetIsNotLiveAndOthersStillAre() async throws {
        let small = try await WatchHarness.committedRepository()
        var files: [String: String] = [:]
        for index in 0..<20 { files["d\(index)/f.txt"] = "\(index)\n" }
        let large = try await WatchHarness.committedRepository(files)
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
