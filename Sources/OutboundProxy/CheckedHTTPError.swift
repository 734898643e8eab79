/// Why a request failed, beside the proxy's (``ProxyError``) and TLS's own errors.
public enum CheckedHTTPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The deadline passed (Go's words, as the REST client reports it).
    case timedOut
    /// The connection was not ready (TCP, the proxy's tunnel or SOCKS connect, TLS's
    /// handshake) within the connect timeout.
    case setupTimedOut
    /// The connection ended before the answer did.
    case incompleteAnswer
    /// The server answered with something that is not an HTTP/1.1 answer to this request.
    case unexpectedAnswer(String)

    public var description: String {
        switch self {
        case .timedOut: "context deadline exceeded"
        case .setupTimedOut: "connect timed out"
        case .incompleteAnswer: "unexpected EOF"
        case .unexpectedAnswer(let why): "malformed HTTP response: \(why)"
        }
    }
}
