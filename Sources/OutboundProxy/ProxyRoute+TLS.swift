import NIOCore
import NIOSSL

/// TLS on the agent's own connections, checked as Go's `crypto/tls` checks it. NIOSSL also
/// accepts a certificate that names the connected address: through a proxy's tunnel that is
/// the proxy's address, so a proxy holding a certificate for its own address could stand in
/// for every target it tunnels to; reached directly, it is wherever DNS pointed, so whoever
/// answers a spoofed name with a certificate for its own address passes. So the chain is
/// verified as usual and the identity is checked here (``CertificateIdentity``): a name
/// against the certificate's DNS names, an address against its IP names. The check runs
/// before the handshake completes, so nothing written behind it leaves first.
extension ProxyRoute {
    /// The configuration for TLS on this route: `configuration` without NIOSSL's identity
    /// check, which ``tlsClientHandler(context:host:serverName:)`` replaces.
    public func tlsConfiguration(_ configuration: TLSConfiguration) -> TLSConfiguration {
        guard configuration.certificateVerification == .fullVerification else { return configuration }
        var adjusted = configuration
        adjusted.certificateVerification = .noHostnameVerification
        return adjusted
    }

    /// The TLS client handler for `host` on this route: `serverName` is its SNI and the name
    /// the certificate must carry (nil for an address, which the certificate must name as
    /// such). `context` comes from ``tlsConfiguration(_:)``; one that still lets NIOSSL check
    /// the identity is refused.
    public func tlsClientHandler(context: NIOSSLContext, host: String, serverName: String?) throws -> NIOSSLClientHandler {
        let verification = context.configuration.certificateVerification
        guard verification != .none else {
            return try NIOSSLClientHandler(context: context, serverHostname: serverName)
        }
        let identity = serverName ?? host
        guard verification == .noHostnameVerification else { throw ProxyError.certificateNotForTarget(identity) }
        // The underscored entry point is the only one for a check after NIOSSL's own; the
        // version is pinned by Package.resolved.
        return try NIOSSLClientHandler._makeSSLClientHandler(context: context, serverHostname: serverName) { certificate, channel in
            CertificateIdentity.names(identity, certificate)
                ? channel.eventLoop.makeSucceededVoidFuture()
                : channel.eventLoop.makeFailedFuture(ProxyError.certificateNotForTarget(identity))
        }
    }
}
