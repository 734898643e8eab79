import NIOCore
import AgentTLS

/// How a connection of the agent's own reaches its target: directly, through an HTTP proxy's
/// `CONNECT` tunnel, through a SOCKS5 proxy, or (http targets only, as Go sends them) as
/// absolute-form requests to an HTTP proxy.
public enum ProxyRoute: Sendable, Equatable {
    case direct
    /// Connect to the proxy (over TLS for an `https://` one), then its `CONNECT`
    /// (``HTTPConnectHandshake``) opens the tunnel.
    case tunnel(ProxyServer)
    /// Connect to the proxy (over TLS for an `https://` one) and send it requests whose target
    /// is the absolute URL.
    case forward(ProxyServer)
    /// Connect to a SOCKS5 proxy (``SOCKS5Handshake``), which connects to the target.
    case socks(ProxyServer)

    /// The route for `scheme://host:port` in `environment`. An https (or wss) target, or any
    /// target when `alwaysTunnel` (DERP's rule), goes through CONNECT; an http one is forwarded;
    /// a SOCKS5 proxy carries either. `anyProxyKind` is for the dials that take every proxy
    /// Go's transport takes (`http://`, `https://`, reached over TLS with its certificate
    /// checked against its host, and `socks5://`); without it (DERP, as Tailscale's client)
    /// only `http://` proxies are used, and the others throw.
    public static func choose(
        scheme: String, host: String, port: Int, environment: ProxyEnvironment = .process, alwaysTunnel: Bool = false,
        anyProxyKind: Bool = false
    ) throws(ProxyError) -> ProxyRoute {
        guard let proxy = try environment.proxy(scheme: scheme, host: host, port: port) else { return .direct }
        switch proxy.kind {
        case .http, .https:
            guard proxy.kind == .http || anyProxyKind else { throw .unsupported(proxy, "only http:// proxies are supported for this connection") }
            let secure = scheme.lowercased() == "https" || scheme.lowercased() == "wss"
            return secure || alwaysTunnel ? .tunnel(proxy) : .forward(proxy)
        case .socks5 where anyProxyKind:
            return .socks(proxy)
        case .socks5:
            throw .unsupported(proxy, "only http:// proxies are supported for this connection")
        }
    }

    /// The route for a URL's text (``choose(scheme:host:port:environment:alwaysTunnel:anyProxyKind:)``);
    /// direct for a URL without a host.
    public static func choose(url: String, environment: ProxyEnvironment = .process, anyProxyKind: Bool = false) throws(ProxyError) -> ProxyRoute {
        guard let target = URLTarget(url) else { return .direct }
        let port = target.port ?? (target.scheme == "https" ? 443 : 80)
        return try choose(scheme: target.scheme, host: target.host, port: port, environment: environment, anyProxyKind: anyProxyKind)
    }

    /// The proxy, if any.
    public var proxy: ProxyServer? {
        switch self {
        case .direct: nil
        case .tunnel(let proxy), .forward(let proxy), .socks(let proxy): proxy
        }
    }

    /// A plain http request's target and the proxy's credentials on this route: to a
    /// forwarding proxy the absolute URL and `Proxy-Authorization` (as Go's transport sends
    /// them), else the origin form and none. `hostHeader` is the request's `Host`.
    public func requestTarget(hostHeader: String, pathAndQuery: String) -> (uri: String, proxyAuthorization: String?) {
        guard case .forward(let proxy) = self else { return (pathAndQuery, nil) }
        return ("http://\(hostHeader)\(pathAndQuery)", proxy.authorization)
    }

    /// Where the TCP connection goes: the proxy, or the target itself.
    public func connectAddress(host: String, port: Int) -> (host: String, port: Int) {
        proxy.map { ($0.host, $0.port) } ?? (host, port)
    }

    /// Adds the route's first handlers to a new connection's pipeline: TLS to an `https://`
    /// proxy (with `proxyContext`, which such a route needs),
    /// then a ``ProxyHandshakeHandler`` with the proxy's handshake, which holds the
    /// handlers behind it until the way to the target is open. Throws for a target SOCKS5
    /// cannot carry (a host name empty or over 255 bytes, a port outside 1...65535).
    public func addHandlers(
        to pipeline: ChannelPipeline.SynchronousOperations, host: String, port: Int, proxyContext: TLSContext? = nil
    ) throws {
        switch self {
        case .direct:
            break
        case .forward(let proxy):
            // Only TLS to an https:// proxy stands before the requests: its errors are named
            // as the proxy's here, as the proxy's handshake names them on the other routes.
            if proxy.kind == .https { try pipeline.addHandler(ProxyTLSErrorHandler(proxy: proxy), position: .first) }
        case .tunnel(let proxy):
            try pipeline.addHandler(ProxyHandshakeHandler(HTTPConnectHandshake(proxy: proxy, host: host, port: port)), position: .first)
        case .socks(let proxy):
            guard let handshake = SOCKS5Handshake(proxy: proxy, host: host, port: port) else {
                throw ProxyError.unsupported(proxy, "a target SOCKS5 cannot carry (a host name empty or over 255 bytes, or a port outside 1-65535)")
            }
            try pipeline.addHandler(ProxyHandshakeHandler(handshake), position: .first)
        }
        if let proxy, proxy.kind == .https {
            // In front of everything: the proxy's handshake (or the forwarded request) and
            // the target's own TLS go inside it.
            guard let context = proxyContext else { throw ProxyError.unsupported(proxy, "no TLS configuration for an https:// proxy") }
            let handler = try ProxyRoute.direct.tlsClientHandler(context: context, host: proxy.host, serverName: Self.serverName(for: proxy.host))
            try pipeline.addHandler(handler, position: .first)
        }
    }

    /// Whether the connection to the proxy itself runs TLS (an `https://` proxy).
    public var proxyTLS: Bool { proxy?.kind == .https }
}
