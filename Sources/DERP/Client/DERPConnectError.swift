/// Why one connection attempt to a DERP server failed.
public enum DERPConnectError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The node has no address to dial (both families `"none"` and no host name).
    case noAddress
    /// The server answered the HTTP request with `status` instead of 101 (4xx: the client
    /// switches to WebSocket; 5xx: it retries).
    case refused(status: Int, body: String)
    /// TLS negotiated HTTP/2, which cannot carry `Upgrade: DERP` (the client switches to
    /// WebSocket, as the Go client does).
    case negotiatedHTTP2
    /// DNS, TCP, TLS, HTTP and the DERP handshake did not finish within the connect deadline.
    case timedOut
    /// The response head was not HTTP or was over its bound.
    case badResponse(String)
    /// The connection failed or ended before the handshake finished.
    case failed(String)

    public var description: String {
        switch self {
        case .noAddress: "DERP node has no address to dial"
        case .refused(let status, let body):
            "GET failed with status code \(status) (a proxy could be disallowing the use of 'Upgrade: derp'): \(body)"
        case .negotiatedHTTP2: "TLS negotiated h2, which cannot upgrade to DERP"
        case .timedOut: "DERP connect did not finish within the deadline"
        case .badResponse(let reason): "bad DERP upgrade response: \(reason)"
        case .failed(let reason): reason
        }
    }

    /// True when the Go client's policy switches to WebSocket after this error.
    public var switchesToWebSocket: Bool {
        switch self {
        case .refused(let status, _): (400..<500).contains(status)
        case .negotiatedHTTP2: true
        default: false
        }
    }
}
