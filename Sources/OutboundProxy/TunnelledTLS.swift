import NIOCore
import NIOSSL

/// TLS inside a proxy's tunnel. NIOSSL accepts a certificate that names the connected
/// address, and through a tunnel that address is the proxy's: a proxy holding a certificate
/// for its own address could stand in for every target it tunnels to, and a target named by
/// an address would be checked against the proxy's. So inside a tunnel the chain is verified
/// as usual and the identity is checked here, as Go's `VerifyHostname` checks it: a name
/// against the certificate's DNS names, an address against its IP names. The check runs
/// before the handshake completes, so nothing written behind it leaves first.
extension ProxyRoute {
    /// The configuration for TLS on this route: `configuration` itself, or inside a tunnel the
    /// same without NIOSSL's identity check, which ``tlsClientHandler(context:host:serverName:)``
    /// replaces.
    public func tlsConfiguration(_ configuration: TLSConfiguration) -> TLSConfiguration {
        guard case .tunnel = self, configuration.certificateVerification == .fullVerification else { return configuration }
        var adjusted = configuration
        adjusted.certificateVerification = .noHostnameVerification
        return adjusted
    }

    /// The TLS client handler for `host` on this route: `serverName` is its SNI and the name
    /// the certificate must carry (nil for an address, which the certificate must name as
    /// such). `context` comes from ``tlsConfiguration(_:)``; inside a tunnel
    /// one that still lets NIOSSL check the identity is refused.
    public func tlsClientHandler(context: NIOSSLContext, host: String, serverName: String?) throws -> NIOSSLClientHandler {
        let verification = context.configuration.certificateVerification
        guard case .tunnel = self, verification != .none else {
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

/// Go's `Certificate.VerifyHostname`: whether a leaf certificate is for `target`. An address
/// needs an IP name of the same bytes (an IPv4 address and its IPv4-mapped IPv6 form are one,
/// as in `net.IP.Equal`); a name needs a DNS name equal to it, ASCII case and a trailing dot
/// aside, where a `*` first label stands for any one label. The subject's common name never
/// counts.
enum CertificateIdentity {
    static func names(_ target: String, _ certificate: NIOSSLCertificate) -> Bool {
        let names = certificate._subjectAlternativeNames()
        if let address = IPAddressBytes(target) {
            return names.contains { $0.nameType == .ipAddress && IPAddressBytes(bytes: Array($0.contents)) == address }
        }
        let host = labels(target)
        guard !host.isEmpty else { return false }
        return names.contains { name in
            guard name.nameType == .dnsName else { return false }
            let pattern = labels(String(decoding: Array(name.contents), as: UTF8.self))
            guard pattern.count == host.count else { return false }
            return zip(pattern, host).enumerated().allSatisfy { index, pair in
                pair.0 == pair.1 || index == 0 && pair.0 == "*"
            }
        }
    }

    /// The labels of a DNS name, lowercased (ASCII), one trailing dot dropped; empty for a
    /// name with an empty label.
    static func labels(_ name: String) -> [Substring] {
        var text = Substring(name.lowercased())
        if text.hasSuffix(".") { text = text.dropLast() }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        return parts.contains(where: \.isEmpty) ? [] : parts
    }
}
