import NIOPosix

/// Runs blocking file-system calls on NIO's thread pool, never on an event loop or Swift's
/// cooperative pool (a slow disk must not stall the server).
enum BlockingIO {
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await NIOThreadPool.singleton.runIfActive(body)
    }
}

extension BlockingIO {
    /// As ``run(_:)`` for work that reports its failures in its result; a pool that is
    /// shutting down runs it inline rather than failing.
    static func runReporting<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        (try? await NIOThreadPool.singleton.runIfActive(body)) ?? body()
    }
}
