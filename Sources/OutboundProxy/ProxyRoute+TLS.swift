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

    /// The name to send as SNI for `host`, as Go's `crypto/tls` chooses it: nil for an IP
    /// address (in brackets or with a zone too: SNI carries names only), else the host
    /// without trailing dots. An address with trailing dots (`10.0.0.1.`) sends none either:
    /// Go would send the bare address, which NIOSSL refuses to put in SNI.
    public static func serverName(for host: String) -> String? {
        var bare = Substring(host)
        if bare.count >= 2, bare.hasPrefix("["), bare.hasSuffix("]") { bare = bare.dropFirst().dropLast() }
        if let zone = bare.lastIndex(of: "%"), zone > bare.startIndex { bare = bare[..<zone] }
        if IPAddressBytes(String(bare)) != nil { return nil }
        var name = Substring(host)
        while name.hasSuffix(".") { name = name.dropLast() }
        guard !name.isEmpty, IPAddressBytes(String(name)) == nil else { return nil }
        return String(name)
    }

    /// The TLS client handler for `host` on this route. `host` is what the certificate must
    /// name, as written (a name, or an address it must name as such), as Go's
    /// `VerifyHostname` is given the configured name; `serverName` is the SNI
    /// (``serverName(for:)``). `context` comes from ``tlsConfiguration(_:)``; one that still
    /// lets NIOSSL check the identity is refused.
    public func tlsClientHandler(context: NIOSSLContext, host: String, serverName: String?) throws -> NIOSSLClientHandler {
        let verification = context.configuration.certificateVerification
        guard verification != .none else {
            return try NIOSSLClientHandler(context: context, serverHostname: serverName)
        }
        let identity = host
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
