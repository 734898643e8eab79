import AgentSystem
import CAgentTLS

/// A configured OpenSSL context (`SSL_CTX`) that connections' ``TLSHandler``s are made from.
/// Making one reads the files and, for a client on the system's store, its default paths:
/// make it once and share it, off the event loop if it may read a large store.
public final class TLSContext: @unchecked Sendable {
    // @unchecked: `pointer` is set once in init and freed in deinit; between them it is only
    // passed to `SSL_new` (through `agent_tls_session_new`), which OpenSSL makes safe on many
    // threads for a context no longer being configured, and nothing here configures it again.
    let pointer: OpaquePointer
    public let configuration: TLSConfiguration

    public init(configuration: TLSConfiguration) throws(TLSError) {
        self.configuration = configuration
        let alpn = configuration.alpnWireFormat
        if let alpn, alpn.count > 64 || configuration.applicationProtocols.contains(where: { $0.utf8.isEmpty || $0.utf8.count > 255 }) {
            throw .configuration("invalid application protocols \(configuration.applicationProtocols)")
        }
        var message = [CChar](repeating: 0, count: 320)
        let made: OpaquePointer?
        if let identity = configuration.serverIdentity {
            let chain: [UInt8]
            let key: [UInt8]
            switch identity {
            case .files(let chainFile, let keyFile):
                chain = try Self.readPEM(chainFile)
                key = try Self.readPEM(keyFile)
            case .pem(let chainBytes, let keyBytes):
                chain = chainBytes
                key = keyBytes
            }
            made = chain.withUnsafeBufferPointer { chain in
                key.withUnsafeBufferPointer { key in
                    Self.withOptional(alpn) { alpnBytes, alpnCount in
                        agent_tls_server_context(
                            chain.baseAddress, chain.count, key.baseAddress, key.count, alpnBytes, alpnCount, &message, message.count)
                    }
                }
            }
        } else {
            let verify: Int32 = configuration.certificateVerification == .fullVerification ? 1 : 0
            let roots: [UInt8]? =
                switch configuration.trustRoots {
                case .system: nil
                case .file(let path): try Self.readPEM(path)
                case .pem(let bytes): bytes
                }
            if let roots, roots.isEmpty { throw .configuration("no certificate in the trust roots") }
            made = Self.withOptional(roots) { rootBytes, rootCount in
                Self.withOptional(alpn) { alpnBytes, alpnCount in
                    agent_tls_client_context(verify, rootBytes, rootCount, alpnBytes, alpnCount, &message, message.count)
                }
            }
        }
        guard let made else { throw .configuration(String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)) }
        pointer = made
    }

    deinit { agent_tls_context_free(pointer) }

    private static func readPEM(_ path: String) throws(TLSError) -> [UInt8] {
        guard let bytes = AtomicFile.read(path, maxBytes: TLSConfiguration.maxPEMBytes) else {
            throw .configuration("cannot read \(path) (or it is over \(TLSConfiguration.maxPEMBytes) bytes)")
        }
        return bytes
    }

    /// `body` with the bytes' address and count, or nil and 0.
    private static func withOptional<R>(_ bytes: [UInt8]?, _ body: (UnsafePointer<UInt8>?, Int) -> R) -> R {
        guard let bytes else { return body(nil, 0) }
        return bytes.withUnsafeBufferPointer { body($0.baseAddress, $0.count) }
    }
}
