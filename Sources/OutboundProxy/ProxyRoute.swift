import AsyncHTTPClient
import NIOCore

/// How a dial of the agent's own reaches its target: directly, through an HTTP proxy's
/// `CONNECT` tunnel, or (http targets only, as Go sends them) as absolute-form requests to an
/// HTTP proxy. AsyncHTTPClient's users take the proxy as its configuration instead
/// (``AsyncHTTPClient/HTTPClient/Configuration/route(through:)``).
public enum ProxyRoute: Sendable, Equatable {
    case direct
    /// Connect to the proxy, then ``HTTPConnectHandler`` opens the tunnel to the target.
    case tunnel(ProxyServer)
    /// Connect to the proxy and send it requests whose target is the absolute URL.
    case forward(ProxyServer)

    /// The route for `scheme://host:port` in `environment`. An https (or wss) target, or any
    /// target when `alwaysTunnel` (DERP's rule), goes through CONNECT; an http one is forwarded.
    /// Throws for a proxy the agent's own dials cannot use (https or SOCKS5 proxies).
    public static func choose(
        scheme: String, host: String, port: Int, environment: ProxyEnvironment = .process, alwaysTunnel: Bool = false
    ) throws(ProxyError) -> ProxyRoute {
        guard let proxy = try environment.proxy(scheme: scheme, host: host, port: port) else { return .direct }
        guard proxy.kind == .http else {
            throw .unsupported(proxy, "only http:// proxies are supported for this connection")
        }
        let secure = scheme.lowercased() == "https" || scheme.lowercased() == "wss"
        return secure || alwaysTunnel ? .tunnel(proxy) : .forward(proxy)
    }

    /// The proxy, if any.
    public var proxy: ProxyServer? {
        switch self {
        case .direct: nil
        case .tunnel(let proxy), .forward(let proxy): proxy
        }
    }

    /// Where the TCP connection goes: the proxy, or the target itself.
    public func connectAddress(host: String, port: Int) -> (host: String, port: Int) {
        proxy.map { ($0.host, $0.port) } ?? (host, port)
    }

    /// Adds ``HTTPConnectHandler`` first in a new connection's pipeline for a tunnel.
    public func addHandlers(to pipeline: ChannelPipeline.SynchronousOperations, host: String, port: Int) throws {
        if case .tunnel(let proxy) = self {
            try pipeline.addHandler(HTTPConnectHandler(proxy: proxy, host: host, port: port), position: .first)
        }
    }
}

extension HTTPClient.Configuration {
    /// Sends this client's requests through `proxy` (nil: directly). AsyncHTTPClient tunnels
    /// https through CONNECT and forwards http as Go does; SOCKS5 without credentials is
    /// supported too. Throws for an https proxy or a SOCKS5 proxy with credentials.
    public mutating func route(through proxy: ProxyServer?) throws(ProxyError) {
        guard let proxy else {
            self.proxy = nil
            return
        }
        switch proxy.kind {
        case .http:
            let authorization = proxy.username.map { HTTPClient.Authorization.basic(username: $0, password: proxy.password ?? "") }
            self.proxy = .server(host: proxy.host, port: proxy.port, authorization: authorization)
        case .socks5:
            guard proxy.username == nil else { throw .unsupported(proxy, "SOCKS5 proxies with credentials are not supported") }
            self.proxy = .socksServer(host: proxy.host, port: proxy.port)
        case .https:
            throw .unsupported(proxy, "proxies reached over TLS (https://) are not supported; use an http:// proxy URL")
        }
    }
}
