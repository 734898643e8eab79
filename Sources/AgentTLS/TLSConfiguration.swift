/// What a ``TLSContext`` is made from: the trust and verification of a client, or the
/// certificate of a server, and the ALPN protocols either offers.
public struct TLSConfiguration: Sendable, Equatable {
    /// Whether a client verifies the server's chain. The identity (which names the chain is
    /// for) is the caller's check, given to ``TLSHandler``.
    public enum CertificateVerification: Sendable, Equatable {
        /// Anything is accepted (tests' relays).
        case none
        /// The chain must lead to one of ``TLSConfiguration/trustRoots``.
        case fullVerification
    }

    /// The certificates a client's verification accepts as roots.
    public enum TrustRoots: Sendable, Equatable {
        /// The system's store (OpenSSL's default paths; `SSL_CERT_FILE` and `SSL_CERT_DIR`
        /// name others, as they do for Go).
        case system
        /// The PEM certificates in a file.
        case file(String)
        /// PEM certificates.
        case pem([UInt8])
    }

    /// A server's certificate chain (leaf first) and key, in PEM.
    public enum ServerIdentity: Sendable, Equatable {
        case files(certificateChain: String, privateKey: String)
        case pem(certificateChain: [UInt8], privateKey: [UInt8])
    }

    public var certificateVerification: CertificateVerification
    public var trustRoots: TrustRoots
    /// ALPN names, most preferred first (a server chooses the first of its own that the
    /// client offers).
    public var applicationProtocols: [String] = []
    /// A server's certificate and key; nil for a client.
    public var serverIdentity: ServerIdentity?

    /// The largest PEM file read (a system's whole trust store is about 200 KiB).
    public static let maxPEMBytes = 16 << 20

    /// A client that verifies against the system's store.
    public static func makeClientConfiguration() -> TLSConfiguration {
        TLSConfiguration(certificateVerification: .fullVerification, trustRoots: .system)
    }

    /// A server presenting the chain and key in these PEM files.
    public static func makeServerConfiguration(certificateChainFile: String, privateKeyFile: String) -> TLSConfiguration {
        makeServerConfiguration(.files(certificateChain: certificateChainFile, privateKey: privateKeyFile))
    }

    /// A server presenting `identity`.
    public static func makeServerConfiguration(_ identity: ServerIdentity) -> TLSConfiguration {
        TLSConfiguration(certificateVerification: .none, trustRoots: .system, serverIdentity: identity)
    }

    /// The ALPN list in its wire format (each name after its length), nil for none.
    var alpnWireFormat: [UInt8]? {
        guard !applicationProtocols.isEmpty else { return nil }
        var bytes: [UInt8] = []
        for name in applicationProtocols {
            bytes.append(UInt8(truncatingIfNeeded: name.utf8.count))
            bytes.append(contentsOf: name.utf8)
        }
        return bytes
    }
}
