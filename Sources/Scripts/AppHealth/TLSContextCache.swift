import AgentTLS
import NIOPosix
import Synchronization

/// The https context, made on first use (on NIO's thread pool: it reads the trust store) and
/// kept for the probe's life. The identity is checked by
/// ``OutboundProxy/ProxyRoute/tlsClientHandler(context:host:serverName:)``.
final class TLSContextCache: Sendable {
    private let configuration: TLSConfiguration
    private let cached = Mutex<TLSContext?>(nil)

    init(configuration: TLSConfiguration) {
        self.configuration = configuration
    }

    /// The context, the same on every route.
    func context() async throws -> TLSContext {
        if let context = cached.withLock({ $0 }) { return context }
        let configuration = configuration
        let made = try await NIOThreadPool.singleton.runIfActive { () throws(TLSError) in try TLSContext(configuration: configuration) }
        return cached.withLock { cached in
            if let existing = cached { return existing }
            cached = made
            return made
        }
    }
}
