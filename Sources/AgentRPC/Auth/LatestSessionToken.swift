import AgentCore
import Synchronization

/// Wraps the dialer's token source and remembers the last token it gave, so other requests
/// (`/reinit`) use the connection's token instead of exchanging one of their own.
public final class LatestSessionToken: SessionTokenSource {
    private let source: any SessionTokenSource
    private let latest = Mutex<String?>(nil)
    /// Opens once the dialer got its first token.
    private let first = Latch()

    public init(_ source: any SessionTokenSource) {
        self.source = source
    }

    /// A fresh token from the source (the dialer's call), remembered.
    public func sessionToken() async throws -> String {
        let token = try await source.sessionToken()
        latest.withLock { $0 = token }
        first.open()
        return token
    }

    /// The last token the dialer got; before its first, waits for it.
    public var remembered: any SessionTokenSource { Remembered(owner: self) }

    private struct Remembered: SessionTokenSource {
        let owner: LatestSessionToken
        func sessionToken() async throws -> String {
            await owner.first.wait()
            try Task.checkCancellation()
            guard let token = owner.latest.withLock({ $0 }) else { throw CancellationError() }
            return token
        }
    }
}
