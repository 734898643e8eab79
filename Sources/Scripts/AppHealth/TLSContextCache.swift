import NIOPosix
import NIOSSL
import OutboundProxy
import Synchronization

/// The https contexts, made on first use (on NIO's thread pool: they read the trust store)
/// and kept for the probe's life: the configuration's own, and the one for TLS inside a
/// proxy's tunnel (``OutboundProxy/ProxyRoute/tlsConfiguration(_:)``).
final class TLSContextCache: Sendable {
    private let configuration: TLSConfiguration
    /// [0]: the configuration's own context; [1]: the tunnel's.
    private let cached = Mutex<[NIOSSLContext?]>([nil, nil])

    init(configuration: TLSConfiguration) {
        self.configuration = configuration
    }

    /// The context for TLS on `route`.
    func context(route: ProxyRoute) async throws -> NIOSSLContext {
        let wanted = route.tlsConfiguration(configuration)
        let slot = wanted.certificateVerification == configuration.certificateVerification ? 0 : 1
        if let context = cached.withLock({ $0[slot] }) { return context }
        let made = try await NIOThreadPool.singleton.runIfActive { try NIOSSLContext(configuration: wanted) }
        return cached.withLock { cached in
            if let existing = cached[slot] { return existing }
            cached[slot] = made
            return made
        }
    }
}
