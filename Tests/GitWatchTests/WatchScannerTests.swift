import AgentCore
import AgentTestSupport
import Foundation
import Testing

@testable import GitWatch

/// One socket's scanner driven directly, on a git pool of its own.
@Suite(.timeLimit(.minutes(3)))
struct WatchScannerTests {
    /// Fills `pool` (one thread, a queue of one): its thread and its queue hold jobs that wait
    /// for the returned gate, so any other job is refused as ``BlockingPool/Overloaded``.
    static func fill(_ pool: BlockingPool) async -> DispatchSemaphore {
        let gate = DispatchSemaphore(value: 0)
        for expected in [(queued: 0, running: 1), (queued: 1, running: 1)] {
            Task {
                try? await pool.run { _ in
                    gate.wait()
                    gate.signal()
                }
            }
            let filled = await eventually { pool.load == expected }
            #expect(filled, "the pool did not fill: \(pool.load)")
        }
        return gate
    }

    /// Opens the gate and waits for the pool to empty.
    static func drain(_ pool: BlockingPool, _ gate: DispatchSemaphore) async {
        gate.signal()
        let drained = await eventually { pool.load == (queued: 0, running: 0) }
        #expect(drained, "the pool did not empty: \(pool.load)")
    }

    /// The git pool full: a repository's scan was taken as unchanged and its generation
    /// recorded, so the edit that woke it was never sent (ticks trusted the generation); and
    /// the paths a chat recorded were dropped until it recorded another. Now neither is
    /// marked as done, and the next scan does it.
    @Test func workTheGitPoolHadNoRoomForIsDoneAtTheNextScan() async throws {
        let root = try await WatchHarness.committedRepository()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let pool = BlockingPool(name: "git-test", threads: 1, maxQueued: 1)
        let watcher = TreeWatcher()
        let scanner = WatchScanner(watcher: watcher, signal: WorkSignal(), pool: pool)

        // Paths that arrive while the pool is full are kept.
        var gate = await Self.fill(pool)
        await scanner.resolve([root + "/f.txt"])
        let watching = await scanner.isWatching
        #expect(!watching, "nothing can be watched before its repository is found")
        await Self.drain(pool, gate)
        let first = await scanner.scan(.events)
        #expect(first?.changed.first?.repoRoot == root)
        #expect(first?.changed.first?.unifiedDiff == "")

        // An edit whose scan the pool refuses is read by the next scan.
        let before = watcher.status(of: root).generation
        try TestFile.write(root + "/f.txt", "edited while the pool was full\n".utf8)
        #expect(await eventually { watcher.status(of: root).generation > before })
        gate = await Self.fill(pool)
        let refused = await scanner.scan(.events)
        #expect(refused?.changed.isEmpty == true)
        await Self.drain(pool, gate)
        let retried = await scanner.scan(.events)
        #expect(retried?.changed.first?.unifiedDiff?.contains("+edited while the pool was full") == true, "\(String(describing: retried))")
    }
}
