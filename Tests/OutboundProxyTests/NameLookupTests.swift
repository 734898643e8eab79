import AgentSystem
import Dispatch
import NIOCore
import NIOHTTP1
import Testing

@testable import OutboundProxy

/// Names looked up on a pool of the caller's (``NameLookup``), never on NIO's per-loop
/// resolver queue: the wait ends at the caller's deadline whatever the lookup does, and a
/// full pool refuses at once.
struct NameLookupTests {
    @Test func anAddressNeedsNoLookup() async throws {
        let pool = BlockingPool(name: "test-dns", threads: 1, maxQueued: 1)
        let found = try await NameLookup.addresses("::1", port: 80, deadline: .now() + .seconds(60), pool: pool)
        #expect(found == [try SocketAddress(ipAddress: "::1", port: 80)])
        #expect(pool.load == (0, 0), "no lookup ran")
        let local = try await NameLookup.addresses("localhost", port: 80, deadline: .now() + .seconds(60), pool: pool)
        #expect(local.contains(try SocketAddress(ipAddress: "127.0.0.1", port: 80)))
    }

    /// A lookup that cannot run (its pool's one thread is held, as by a lookup whose DNS
    /// never answers) is given up at the deadline; one more than the pool queues is refused.
    @Test func aStuckPoolEndsTheWaitAtTheDeadline() async throws {
        let pool = BlockingPool(name: "test-dns", threads: 1, maxQueued: 1)
        let release = DispatchSemaphore(value: 0)
        #expect(pool.submit { release.wait() })
        defer { release.signal() }
        // The pool's thread has taken the blocking job (bounded: a loaded host was seen to
        // start it seconds late, and the job still queued made the order of what follows
        // another one).
        let started = ContinuousClock.now + .seconds(120)
        while pool.load != (0, 1), ContinuousClock.now < started { try await Task.sleep(for: .milliseconds(10)) }
        try #require(pool.load == (0, 1))
        let timedOut = await #expect(throws: NameLookup.Failure.self) {
            _ = try await NameLookup.addresses("localhost", port: 80, deadline: .now() + .milliseconds(100), pool: pool)
        }
        #expect(timedOut?.description == "timed out")
        // The lookup given up keeps its place in the queue until a thread skips it, so the
        // queue is full: the next lookup is refused at once.
        #expect(pool.load == (1, 1))
        let refused = await #expect(throws: NameLookup.Failure.self) {
            _ = try await NameLookup.addresses("localhost", port: 80, deadline: .now() + .seconds(60), pool: pool)
        }
        #expect(refused?.description == "lookup localhost: too many lookups waiting")
    }

    /// A client given lookups reaches a server by name.
    @Test func aClientWithLookupsReachesANamedServer() async throws {
        try await CheckedHTTPKeepAliveTests.withServer { port, _ in
            let client = try CheckedHTTPClient(route: .direct, lookups: BlockingPool(name: "test-dns", threads: 1, maxQueued: 4))
            let request = try #require(CheckedHTTPClient.Request(method: .GET, url: "http://localhost:\(port)/ok"))
            let status = try await client.execute(request, deadline: .now() + .seconds(60)) { head, _ in Int(head.status.code) }
            #expect(status == 200)
        }
    }
}
