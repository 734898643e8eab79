import AgentSystem
import AgentTestSupport
import Dispatch
import Foundation
import NIOCore
import Testing

@testable import AgentTLS

/// Dials share one context per configuration; the cache is bounded and keeps no failure.
@Suite(.timeLimit(.minutes(2)))
struct TLSContextCacheTests {
    /// A dial's deadline, far enough for any make on a busy host.
    static var deadline: NIODeadline { .now() + .seconds(60) }

    /// A client configuration told apart from others by its ALPN name.
    static func configuration(_ name: String) -> TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.applicationProtocols = [name]
        return configuration
    }

    @Test func theSameConfigurationGetsTheSameContext() async throws {
        let cache = TLSContextCache()
        let first = try await cache.context(for: Self.configuration("a"), deadline: Self.deadline)
        #expect(try await cache.context(for: Self.configuration("a"), deadline: Self.deadline) === first)
        #expect(try await cache.context(for: Self.configuration("b"), deadline: Self.deadline) !== first)
        #expect(cache.count == 2)
    }

    @Test func theConfigurationUsedLongestAgoGoesBeyondTheBound() async throws {
        let cache = TLSContextCache()
        let first = try await cache.context(for: Self.configuration("0"), deadline: Self.deadline)
        let second = try await cache.context(for: Self.configuration("1"), deadline: Self.deadline)
        // Used again: "1" is now the one used longest ago.
        #expect(try await cache.context(for: Self.configuration("0"), deadline: Self.deadline) === first)
        for index in 2...TLSContextCache.maxEntries {
            _ = try await cache.context(for: Self.configuration("\(index)"), deadline: Self.deadline)
        }
        #expect(cache.count == TLSContextCache.maxEntries)
        #expect(try await cache.context(for: Self.configuration("0"), deadline: Self.deadline) === first)
        #expect(try await cache.context(for: Self.configuration("1"), deadline: Self.deadline) !== second)
        #expect(cache.count == TLSContextCache.maxEntries)
    }

    @Test func dialsAskingAtOnceShareOneContext() async throws {
        let cache = TLSContextCache()
        let contexts = try await withThrowingTaskGroup(of: TLSContext.self) { group in
            for _ in 0..<16 { group.addTask { try await cache.context(for: Self.configuration("once"), deadline: Self.deadline) } }
            return try await group.reduce(into: [TLSContext]()) { $0.append($1) }
        }
        #expect(contexts.count == 16 && contexts.allSatisfy { $0 === contexts[0] })
        #expect(cache.count == 1)
    }

    @Test func aContextThatCouldNotBeMadeIsMadeAgainNextTime() async throws {
        let certificate = try await TestCertificate.make(names: "DNS:localhost")
        defer { certificate.remove() }
        let roots = certificate.directory + "/roots.pem"
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.trustRoots = .file(roots)
        let cache = TLSContextCache()
        await #expect(throws: TLSError.self) { try await cache.context(for: configuration, deadline: Self.deadline) }
        #expect(cache.count == 0)
        try FileManager.default.copyItem(atPath: certificate.certificate, toPath: roots)
        _ = try await cache.context(for: configuration, deadline: Self.deadline)
        #expect(cache.count == 1)
    }

    /// A pool whose one thread is held until the returned release is called: a make queued on
    /// it waits, as one behind a make reading trust roots from a hung mount.
    static func heldPool() async throws -> (BlockingPool, @Sendable () -> Void) {
        let pool = BlockingPool(name: "tls-test", threads: 1, maxQueued: 4)
        let gate = DispatchSemaphore(value: 0)
        let held = DispatchSemaphore(value: 0)
        Task {
            try? await pool.run { _ in
                held.signal(); gate.wait()
            }
        }
        // The thread is taken before the test's make is queued behind it.
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                held.wait(); done.resume()
            }
        }
        return (pool, { gate.signal() })
    }

    @Test func aDialWaitsForAHeldMakeOnlyUntilItsDeadline() async throws {
        let (pool, release) = try await Self.heldPool()
        defer { release() }
        let cache = TLSContextCache(pool: pool)
        do {
            _ = try await cache.context(for: Self.configuration("held"), deadline: .now() + .milliseconds(200))
            Issue.record("the dial got a context while the make was held")
        } catch let error as TLSError {
            guard case .timedOut = error else { throw error }
        }
        // The waiter left; the make goes on and serves the next dial once it is let through.
        #expect(cache.waiting == 0)
        #expect(cache.count == 1)
        release()
        let context = try await cache.context(for: Self.configuration("held"), deadline: Self.deadline)
        #expect(try await cache.context(for: Self.configuration("held"), deadline: Self.deadline) === context)
    }

    @Test func aCancelledDialStopsWaitingForAHeldMake() async throws {
        let (pool, release) = try await Self.heldPool()
        defer { release() }
        let cache = TLSContextCache(pool: pool)
        let dial = Task { try await cache.context(for: Self.configuration("cancelled"), deadline: Self.deadline) }
        #expect(await eventually { cache.waiting == 1 })
        dial.cancel()
        await #expect(throws: CancellationError.self) { try await dial.value }
        #expect(cache.waiting == 0)
    }

    @Test func aDialCancelledBeforeItAsksDoesNotWait() async throws {
        let (pool, release) = try await Self.heldPool()
        defer { release() }
        let cache = TLSContextCache(pool: pool)
        let dial = Task {
            // Cancelled before it waits: the cancellation handler runs before the wait begins.
            withUnsafeCurrentTask { $0?.cancel() }
            return try await cache.context(for: Self.configuration("cancelled first"), deadline: Self.deadline)
        }
        await #expect(throws: CancellationError.self) { try await dial.value }
        #expect(cache.waiting == 0)
    }
}
