/// Why TLS on a connection, or a context, failed. The messages are OpenSSL's reasons.
public enum TLSError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The configuration could not be used (an unreadable file, no certificate in it).
    case configuration(String)
    /// The handshake failed: the peer's chain was refused, or the protocol broke.
    case handshakeFailed(String)
    /// The connection ended without the peer's close_notify (Go's `io.ErrUnexpectedEOF`
    /// when it cuts an answer short).
    case uncleanShutdown
    /// After the handshake, the peer's records could not be read or ours written.
    case failed(String)
    /// More plaintext was written before the handshake completed than is held for it.
    case tooMuchBeforeHandshake(limit: Int)
    /// A dial's deadline passed while its context was still being made.
    case timedOut(String)

    public var description: String {
        switch self {
        case .configuration(let reason): "TLS configuration: \(reason)"
        case .handshakeFailed(let reason): "TLS handshake failed: \(reason)"
        case .uncleanShutdown: "TLS connection ended without close_notify"
        case .failed(let reason): "TLS failed: \(reason)"
        case .tooMuchBeforeHandshake(let limit): "more than \(limit) bytes written before the TLS handshake completed"
        case .timedOut(let reason): "TLS setup timed out: \(reason)"
        }
    }
}
