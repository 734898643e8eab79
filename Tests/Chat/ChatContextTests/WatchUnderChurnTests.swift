import AgentCore
import AgentTestSupport
@testable import ChatContext
import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The watchers' debounce under churn: as a state machine on a made-up clock (a burst is
/// due at most 1 s after its first event, however often events come), and for real: an
/// `AGENTS.md` edit lands while a file nearby is created and deleted every 50 ms.
@Suite(.timeLimit(.minutes(3)))
struct WatchUnderChurnTests {
    @Test func aBurstIsDueAtMostOneSecondAfterItsFirstEvent() {
        let start = ContinuousClock.now
        var debounce = TrailingDebounce()
        // An event every 100 ms for 10 s: never quiet for 250 ms.
        var fired: [Duration] = []
        for tick in 0..<100 {
            let now = start + .milliseconds(100 * tick)
            if debounce.fire(at: now) { fired.append(now - start) }
            debounce.event(at: now)
        }
        #expect(fired.first.map { $0 <= .seconds(1) } == true, "\(fired)")
        // Each later burst is held at most as long.
        for (earlier, later) in zip(fired, fired.dropFirst()) { #expect(later - earlier <= .milliseconds(1100), "\(fired)") }
        #expect(fired.count >= 9, "\(fired)")
    }

    @Test func aQuietBurstStillWaitsOnlyTheQuietTime() {
        let start = ContinuousClock.now
        var debounce = TrailingDebounce()
        debounce.event(at: start)
        debounce.event(at: start + .milliseconds(100))
        #expect(debounce.deadline == start + .milliseconds(350))
        #expect(debounce.pollTimeout(at: start + .milliseconds(100)) == 250)
        let early = debounce.fire(at: start + .milliseconds(349))
        #expect(!early)
        let due = debounce.fire(at: start + .milliseconds(350))
        #expect(due)
        // Consumed: the next burst's limit counts from its own first event.
        debounce.event(at: start + .seconds(5))
        #expect(debounce.latest == start + .seconds(6))
        #expect(debounce.deadline == start + .seconds(5) + .milliseconds(250))
    }

    @Test func theLimitCapsTheDeadline() {
        let start = ContinuousClock.now
        var debounce = TrailingDebounce(delay: .milliseconds(250), maxExtraWait: .milliseconds(750))
        debounce.event(at: start)
        debounce.event(at: start + .milliseconds(900))
        #expect(debounce.deadline == start + .seconds(1))
        #expect(debounce.pollTimeout(at: start + .milliseconds(900)) == 100)
        let due = debounce.fire(at: start + .seconds(1))
        #expect(due)
    }

    @Test func anEditLandsWhileTheDirectoryChurns() async throws {
        let tree = try TempTree()
        let agents = try tree.write("project/AGENTS.md", "# Rules\n")
        let manager = ContextManager(
            configuration: .init(), home: tree.root, directory: tree.path("project"), manifest: ManifestStore(), gate: .open)
        let task = Task { try await manager.run() }
        defer { task.cancel() }
        #expect(await eventually { manager.snapshot.resources.contains { $0.source == agents } })
        let churning = Mutex((stopped: false, rounds: 0))
        let directory = tree.path("project")
        Thread.detachNewThread {
            var round = 0
            while !churning.withLock({ $0.stopped }) {
                let path = directory + "/churn-\(round % 4).tmp"
                let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
                if fd >= 0 { close(fd) }
                unlink(path)
                round += 1
                churning.withLock { $0.rounds = round }
                usleep(50_000)
            }
        }
        defer { churning.withLock { $0.stopped = true } }
        #expect(await eventually { churning.withLock { $0.rounds } >= 5 })
        try tree.write("project/AGENTS.md", "# Rules, edited under churn\n")
        #expect(await eventually { manager.snapshot.resources.first { $0.source == agents }?.description == "Rules, edited under churn" })
        let rounds = churning.withLock { $0.rounds }
        // The churn was still going: the edit did not wait for quiet.
        #expect(await eventually { churning.withLock { $0.rounds } > rounds })
    }
}
