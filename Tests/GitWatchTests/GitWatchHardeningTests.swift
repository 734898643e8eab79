import AgentCore
import AgentHTTP
import AgentTestSupport
import Foundation
import GitWatch
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Ordinary editing must never end the agent: libgit2 mapped working-tree files
/// to diff them, and a file truncated under the mapping raised SIGBUS in the whole process.
@Suite(.timeLimit(.minutes(2)))
struct GitWatchHardeningTests {
    /// How long the rewrite loop runs against concurrent scans (stated in docs/api/git.md).
    static let rewriteSeconds: Double = 8
    /// Scans that met a truncated mapping after which the loop may stop early.
    static let enoughFaults = 5

    /// A 2 MiB tracked file rewritten through truncation (`>` in a shell, an editor's save)
    /// while two threads diff the repository without pause. Before the fix this killed the
    /// test process within seconds; now scans either see some version of the file or fail
    /// and are retried.
    @Test func truncatingAFileDuringScansIsSurvived() async throws {
        let big = String(repeating: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n", count: 32 << 10)
        let root = try await WatchHarness.committedRepository(["big.txt": big])
        defer { try? FileManager.default.removeItem(atPath: root) }
        let path = root + "/big.txt"
        // One line changed: the diff stays small while the whole file is read to make it.
        let variant = Array(("changed line\n" + big.dropFirst(64)).utf8)
        let counts = LoopCounts()
        let (stop, scans, failures, rewrites, faults) = (counts.stop, counts.scans, counts.failures, counts.rewrites, counts.faults)
        // The three loops block, so each runs on a thread of its own: on Swift's cooperative
        // threads (two on a 2-core CI machine) they starved every other test in the process.
        async let rewriting: Void = onThread {
            let deadline = Date().addingTimeInterval(Self.rewriteSeconds)
            var round = 0
            // Stops early once scans have hit a truncated mapping often enough (each was a
            // SIGBUS that ended the process before the fix), to load the machine no longer
            // than needed.
            while Date() < deadline, round < 1_000_000, faults.load() < Self.enoughFaults {
                round += 1
                let fd = open(path, O_WRONLY | O_TRUNC)
                guard fd >= 0 else { continue }
                // Written in pieces, so readers see short files often.
                variant.withUnsafeBytes { raw in
                    var offset = 0
                    while offset < raw.count {
                        let n = write(fd, raw.baseAddress! + offset, min(64 << 10, raw.count - offset))
                        if n <= 0 { break }
                        offset += n
                    }
                }
                close(fd)
                rewrites.add(1, ordering: .relaxed)
            }
            stop.set()
        }
        let scanning: @Sendable () -> Void = {
            var rounds = 0
            while !stop.isSet, rounds < 1_000_000 {
                rounds += 1
                do {
                    _ = try GitSnapshotter.snapshot(root: root)
                    scans.add(1, ordering: .relaxed)
                } catch {
                    failures.add(1, ordering: .relaxed)
                    if (error as? GitError)?.isFileChangedDuringScan == true { faults.add(1, ordering: .relaxed) }
                }
            }
        }
        async let first: Void = onThread(scanning)
        async let second: Void = onThread(scanning)
        _ = await (rewriting, first, second)
        _ = (stop, scans, failures, rewrites, faults)
        #expect(counts.scans.load(ordering: .relaxed) + counts.failures.load(ordering: .relaxed) > 10)
        #expect(rewrites.load(ordering: .relaxed) > 10)
        // Quiet again: the next scan sees the final content exactly.
        let snapshot = try GitSnapshotter.snapshot(root: root)
        #expect(snapshot.unifiedDiff.contains("+changed line\n"))
        #expect(!snapshot.diffTruncated)
        print("rewrites \(counts.rewrites.load()), scans \(counts.scans.load()), failed scans \(counts.failures.load()), of them on a truncated mapping \(counts.faults.load())")
    }
}

/// Counters shared by the loops of a stress test.
final class LoopCounts: Sendable {
    let stop = TestFlag()
    let faults = AtomicCount()
    let scans = AtomicCount()
    let failures = AtomicCount()
    let rewrites = AtomicCount()
}

final class AtomicCount: Sendable {
    private let value = Atomic<Int>(0)
    func add(_ n: Int, ordering: AtomicUpdateOrdering = .relaxed) { value.add(n, ordering: .relaxed) }
    func load(ordering: AtomicLoadOrdering = .relaxed) -> Int { value.load(ordering: .relaxed) }
}

/// A socket closed for a limit or an eviction says why (it was a bare 1000).
@Suite(.timeLimit(.minutes(3)))
struct GitWatchCloseReasonTests {
    @Test func theWatcherLimitIsNamedInTheCloseFrame() async throws {
        let paths = ChatPaths()
        let module = GitWatchModule(context: WatchHarness.context(paths), timing: GitWatchLiveTests.slowPoll)
        try await withAgentServer([HTTPMount(module, at: "/api/v0/git")]) { port in
            let path = "/api/v0/git/watch?chat_id=\(WatchHarness.chat)"
            // Sixteen sockets hold the chat's subscriptions; the seventeenth is refused.
            try await Self.nest(ChatPaths.maxSubscribersPerChat, port: port, path: path, paths: paths) {
                try await TestWebSocket.withConnection(port: port, path: path) { ws in
                    let message = try await ws.next()
                    #expect(message == nil)
                    #expect(ws.closeCode == 1008)
                    #expect(ws.closeReason?.contains("too many watch sockets") == true)
                }
            }
        }
    }

    @Test func anEvictedChatIsNamedInTheCloseFrame() async throws {
        let paths = ChatPaths(maxChats: 2)
        let module = GitWatchModule(context: WatchHarness.context(paths), timing: GitWatchLiveTests.slowPoll)
        try await withAgentServer([HTTPMount(module, at: "/api/v0/git")]) { port in
            try await TestWebSocket.withConnection(port: port, path: "/api/v0/git/watch?chat_id=\(WatchHarness.chat)") { ws in
                // The socket's subscription is registered (the chat is known) before the store fills.
                for _ in 0..<500 where paths.chatCount == 0 { try await Task.sleep(for: .milliseconds(10)) }
                #expect(paths.chatCount == 1)
                paths.record("/tmp/a", chat: WatchHarness.chat)
                // Two newer chats with paths push the watched one out of the bounded store.
                paths.record("/tmp/b", chat: "11111111-1111-4111-8111-111111111111")
                paths.record("/tmp/c", chat: "22222222-2222-4222-8222-222222222222")
                var messages = 0
                while try await ws.next() != nil, messages < 50 { messages += 1 }
                #expect(ws.closeCode == 1013)
                #expect(ws.closeReason?.contains("evicted") == true)
            }
        }
    }

    /// Opens `count` sockets one inside the other, then runs `body` with all of them open.
    /// Opens `count` sockets, one inside the other, each registered before the next opens
    /// (the upgrade's answer comes before the handler subscribes), then runs `body`.
    static func nest(_ count: Int, port: Int, path: String, paths: ChatPaths, depth: Int = 1, _ body: () async throws -> Void) async throws {
        guard count > 0 else { return try await body() }
        try await TestWebSocket.withConnection(port: port, path: path) { _ in
            let registered = await eventually(timeout: .seconds(30)) { paths.subscriberCount(chat: WatchHarness.chat) >= depth }
            #expect(registered, "socket \(depth) was not registered")
            try await nest(count - 1, port: port, path: path, paths: paths, depth: depth + 1, body)
        }
    }
}

@Suite(.timeLimit(.minutes(3)))
struct GitDiffBytesTests {
    /// Content that is not UTF-8 reaches the client byte for byte (it was replaced by U+FFFD).
    @Test func aDiffOfNonUTF8ContentIsByteExact() async throws {
        let root = try await WatchHarness.committedRepository(["latin1.txt": "plain\n"])
        defer { try? FileManager.default.removeItem(atPath: root) }
        let line: [UInt8] = [0x63, 0x61, 0x66, 0xE9, 0x20, 0xFF, 0x0A]
        try TestFile.write(root + "/latin1.txt", Array("plain\n".utf8) + line)
        let snapshot = try GitSnapshotter.snapshot(root: root)
        let bytes = FilePathText.encode(snapshot.unifiedDiff)
        #expect(bytes.firstRange(of: [0x2B] + line) != nil, "\(snapshot.unifiedDiff)")
    }
}
