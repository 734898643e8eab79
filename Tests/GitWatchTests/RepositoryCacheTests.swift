import AgentCore
import AgentTestSupport
import Foundation
@testable import GitWatch
import Testing

/// One poll per repository, not per socket: sockets watching a repository too
/// big for inotify each computed its fingerprint on every tick.
@Suite(.timeLimit(.minutes(3)))
struct RepositoryCacheTests {
    @Test func socketsOfOneRepositoryShareItsPoll() async throws {
        let root = try await WatchHarness.committedRepository(["a.txt": "one\n"])
        defer { try? FileManager.default.removeItem(atPath: root) }
        // No inotify budget: the repository is polled by fingerprint.
        let watcher = TreeWatcher(maxWatches: 0)
        let cache = RepositoryCache()
        let scanners = (0..<8).map { _ in WatchScanner(watcher: watcher, signal: WorkSignal(), cache: cache, sharedFreshness: .seconds(30)) }
        for scanner in scanners { await scanner.resolve([root + "/a.txt"]) }
        for scanner in scanners { _ = await scanner.scan(.events) }
        #expect(cache.readCounts.fingerprints == 1, "\(cache.readCounts)")
        #expect(cache.readCounts.snapshots == 1, "\(cache.readCounts)")
        // A second round of polls by every socket: still the one read.
        for scanner in scanners { _ = await scanner.scan(.events) }
        #expect(cache.readCounts.fingerprints == 1)

        // A client's refresh reads the tree now, and sees a change made meanwhile.
        try TestFile.write(root + "/a.txt", "two\n".utf8)
        let refreshed = await scanners[0].scan(.fingerprint)
        #expect(cache.readCounts.fingerprints == 2)
        #expect(refreshed?.changed.first?.unifiedDiff?.contains("+two") == true)
        // The other sockets take that snapshot instead of reading it again.
        for scanner in scanners.dropFirst() {
            let result = await scanner.scan(.fingerprint)
            #expect(result?.changed.first?.unifiedDiff?.contains("+two") == true)
        }
        #expect(cache.readCounts.snapshots == 2, "\(cache.readCounts)")
    }
}
