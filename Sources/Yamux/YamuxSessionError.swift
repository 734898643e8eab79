/// Why a session or stream operation failed.
public enum YamuxSessionError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The session is closed (locally, by EOF, or after a fatal error).
    case sessionClosed
    /// The peer sent GoAway: no new streams.
    case remoteGoAway
    /// The stream was reset (RST) by either side, or refused.
    case streamReset
    /// Writing after this side's FIN.
    case streamClosed
    /// The peer broke the protocol; the session answered GoAway(1) and closed.
    case protocolError(String)
    /// A ping was not answered in time.
    case pingTimeout

    public var description: String {
        switch self {
        case .sessionClosed: return "yamux: session closed"
        case .remoteGoAway: return "yamux: remote end is not accepting connections"
        case .streamReset: return "yamux: connection reset"
        case .streamClosed: return "yamux: stream closed for writing"
        case .protocolError(let text): return "yamux: protocol error: \(text)"
        case .pingTimeout: return "yamux: keepalive ping timed out"
        }
    }
}
