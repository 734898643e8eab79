import AgentCore
import AgentHTTP
import AgentTestSupport
import Foundation
@testable import GitWatch
import Synchronization
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

    /// Refreshes that arrive while another socket reads the repository share the next read
    /// instead of each reading it again (each refresh asks for a fingerprint taken from now:
    /// eight sockets refreshing at once made eight reads in a row on the git pool's threads).
    @Test func refreshesThatWaitShareTheNextRead() async throws {
        let cache = RepositoryCache()
        let computes = Mutex(0)
        let arrived = Mutex(0)
        let first = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let group = DispatchGroup()
        func call(_ isFirst: Bool) {
            group.enter()
            DispatchQueue.global().async {
                if !isFirst { arrived.withLock { $0 += 1 } }
                _ = try? cache.fingerprint(root: "/r", freshWithin: .zero) { () throws(GitError) -> String in
                    let n = computes.withLock { c -> Int in
                        c += 1
                        return c
                    }
                    if n == 1 {
                        first.signal()
                        release.wait()
                    }
                    return "f\(n)"
                }
                group.leave()
            }
        }
        call(true)
        first.wait()
        for _ in 0..<7 { call(false) }
        // The seven are on their way in while the first read is held.
        #expect(await eventually { arrived.withLock { $0 } == 7 })
        release.signal()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in group.notify(queue: .global()) { done.resume() } }
        // The first read began before the others arrived: one more read serves them all
        // (a caller slow to take its arrival time may make one more).
        #expect(computes.withLock { $0 } <= 3, "\(computes.withLock { $0 }) reads")
    }

    /// A socket opened after the last one watching a repository closed is sent the tree as
    /// it is now. The repository's generations started again at 1 while the shared cache
    /// kept the snapshot taken at generation 1, so the new socket was sent the clean tree
    /// of before an edit made while nobody watched (and later ticks skipped the repository).
    @Test func aSocketOpenedAfterTheLastOneClosedSeesEditsMadeMeanwhile() async throws {
        let root = try await WatchHarness.committedRepository()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let paths = ChatPaths()
        paths.record(root + "/f.txt", chat: WatchHarness.chat)
        let module = GitWatchModule(context: WatchHarness.context(paths), timing: GitWatchLiveTests.slowPoll)
        let watcher = module.socket.watcher
        try await withAgentServer([HTTPMount(module, at: "/api/v0/git")]) { port in
            let path = "/api/v0/git/watch?chat_id=\(WatchHarness.chat)"
            try await TestWebSocket.withConnection(port: port, path: path) { ws in
                var client = WatchClient(ws: ws)
                let first = try await client.nextRepositories()
                #expect(first.first?["repo_root"] as? String == root)
                #expect(first.first?.diff == "")
                try await client.ws.close()
            }
            // The closed socket's scanner let the repository go: nothing watches it.
            #expect(await eventually { watcher.status(of: root).generation == 0 }, "the repository is still watched")
            try TestFile.write(root + "/f.txt", "edited while nobody watched\n".utf8)
            try await TestWebSocket.withConnection(port: port, path: path) { ws in
                var client = WatchClient(ws: ws)
                let first = try await client.nextRepositories()
                #expect(first.first?["repo_root"] as? String == root)
                #expect(first.first?.diff.contains("+edited while nobody watched") == true, "\(first)")
                try await client.ws.close()
            }
        }
    }
}
