import NIOPosix
import NIOSSL
import OutboundProxy
import Synchronization

/// The https context, made on first use (on NIO's thread pool: it reads the trust store) and
/// kept for the probe's life: the configuration with the identity check left to
/// ``OutboundProxy/ProxyRoute/tlsClientHandler(context:host:serverName:)``.
final class TLSContextCache: Sendable {
    private let configuration: TLSConfiguration
    private let cached = Mutex<NIOSSLContext?>(nil)

    init(configuration: TLSConfiguration) {
        self.configuration = ProxyRoute.direct.tlsConfiguration(configuration)
    }

    /// The context, the same on every route.
    func context() async throws -> NIOSSLContext {
        if let context = cached.withLock({ $0 }) { return context }
        let configuration = configuration
        let made = try await NIOThreadPool.singleton.runIfActive { try NIOSSLContext(configuration: configuration) }
        return cached.withLock { cached in
            if let existing = cached { return existing }
            cached = made
            return made
        }
    }
}
