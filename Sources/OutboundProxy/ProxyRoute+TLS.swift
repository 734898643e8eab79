import AgentTLS

/// TLS on the agent's own connections, checked as Go's `crypto/tls` checks it: OpenSSL
/// verifies the chain against the trust, and the identity is checked here
/// (``CertificateIdentity``): a name against the certificate's DNS names, an address against
/// its IP names, never the subject's common name. `host` is always the target's (or, for TLS
/// to an `https://` proxy, the proxy's) own name: never the connected address, which through
/// a proxy's tunnel is the proxy's and reached directly is wherever DNS pointed. The check
/// runs when the handshake completes, before anything written behind it leaves.
extension ProxyRoute {
    /// The name to send as SNI for `host`, as Go's `crypto/tls` chooses it: nil for an IP
    /// address (in brackets or with a zone too: SNI carries names only), else the host
    /// without trailing dots. An address with trailing dots (`10.0.0.1.`) sends none either:
    /// Go would send the bare address, which RFC 6066 does not allow in SNI.
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
    /// (``serverName(for:)``). A context that verifies nothing (tests' relays) checks no
    /// identity either.
    public func tlsClientHandler(context: TLSContext, host: String, serverName: String?) throws -> TLSHandler {
        guard context.configuration.certificateVerification == .fullVerification else {
            return try TLSHandler(client: context, serverName: serverName)
        }
        let identity = host
        return try TLSHandler(client: context, serverName: serverName) { names in
            CertificateIdentity.names(identity, names ?? []) ? nil : ProxyError.certificateNotForTarget(identity)
        }
    }
}
