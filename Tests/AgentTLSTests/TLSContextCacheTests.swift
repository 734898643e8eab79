import AgentTestSupport
import Foundation
import Testing

@testable import AgentTLS

/// Dials share one context per configuration; the cache is bounded and keeps no failure.
@Suite(.timeLimit(.minutes(2)))
struct TLSContextCacheTests {
    /// A client configuration told apart from others by its ALPN name.
    static func configuration(_ name: String) -> TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.applicationProtocols = [name]
        return configuration
    }

    @Test func theSameConfigurationGetsTheSameContext() async throws {
        let cache = TLSContextCache()
        let first = try await cache.context(for: Self.configuration("a"))
        #expect(try await cache.context(for: Self.configuration("a")) === first)
        #expect(try await cache.context(for: Self.configuration("b")) !== first)
        #expect(cache.count == 2)
    }

    @Test func theConfigurationUsedLongestAgoGoesBeyondTheBound() async throws {
        let cache = TLSContextCache()
        let first = try await cache.context(for: Self.configuration("0"))
        let second = try await cache.context(for: Self.configuration("1"))
        // Used again: "1" is now the one used longest ago.
        #expect(try await cache.context(for: Self.configuration("0")) === first)
        for index in 2...TLSContextCache.maxEntries {
            _ = try await cache.context(for: Self.configuration("\(index)"))
        }
        #expect(cache.count == TLSContextCache.maxEntries)
        #expect(try await cache.context(for: Self.configuration("0")) === first)
        #expect(try await cache.context(for: Self.configuration("1")) !== second)
        #expect(cache.count == TLSContextCache.maxEntries)
    }

    @Test func dialsAskingAtOnceShareOneContext() async throws {
        let cache = TLSContextCache()
        let contexts = try await withThrowingTaskGroup(of: TLSContext.self) { group in
            for _ in 0..<16 { group.addTask { try await cache.context(for: Self.configuration("once")) } }
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
        await #expect(throws: TLSError.self) { try await cache.context(for: configuration) }
        #expect(cache.count == 0)
        try FileManager.default.copyItem(atPath: certificate.certificate, toPath: roots)
        _ = try await cache.context(for: configuration)
        #expect(cache.count == 1)
    }
}
