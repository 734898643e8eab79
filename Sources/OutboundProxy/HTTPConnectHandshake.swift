/// `CONNECT host:port` to an HTTP proxy (its credentials, if any, as `Proxy-Authorization`),
/// and its answer (``ProxyConnectAnswer``): only 200 opens the tunnel, as in Go's transport.
public struct HTTPConnectHandshake: ProxyHandshake, Sendable {
    public let proxy: ProxyServer
    /// `host:port`, brackets around an IPv6 address.
    let target: String
    private var answer = ProxyConnectAnswer()

    /// - Parameters:
    ///   - host: the target's host (a name, or an address without brackets).
    ///   - port: the target's port.
    public init(proxy: ProxyServer, host: String, port: Int) {
        self.proxy = proxy
        target = (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
    }

    public mutating func opening() -> [UInt8] {
        var request = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n"
        if let authorization = proxy.authorization { request += "Proxy-Authorization: \(authorization)\r\n" }
        request += "\r\n"
        return Array(request.utf8)
    }

    public mutating func feed(_ bytes: some Collection<UInt8>) -> ProxyHandshakeStep {
        switch answer.feed(bytes) {
        case .incomplete: .incomplete
        case .established(let rest): .established(rest: rest)
        case .refused(let status, let reason): .failed(.refused(proxy: proxy, target: target, status: status, reason: reason))
        case .malformed(let why): .failed(.malformedAnswer(proxy: proxy, why))
        }
    }

    public func unanswered(_ why: String) -> ProxyError {
        .malformedAnswer(proxy: proxy, why)
    }
}
