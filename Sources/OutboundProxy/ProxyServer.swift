import FoundationEssentials

/// A proxy from the environment: its kind, address and credentials. Its description never
/// carries the credentials (logs and errors show `http://proxy.example:3128`).
public struct ProxyServer: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    public enum Kind: String, Sendable, Hashable {
        /// An HTTP proxy: CONNECT for https targets, absolute-form requests for http ones.
        case http
        /// An HTTP proxy reached over TLS, its certificate checked against its host.
        case https
        /// A SOCKS5 proxy.
        case socks5
    }

    public let kind: Kind
    /// The proxy's host, without brackets for an IPv6 address.
    public let host: String
    /// The proxy's port (the kind's default when the URL has none: 80, 443, 1080).
    public let port: Int
    public let username: String?
    public let password: String?

    public init(kind: Kind, host: String, port: Int, username: String? = nil, password: String? = nil) {
        self.kind = kind
        self.host = host
        self.port = port
        self.username = username
        self.password = password
    }

    /// A proxy URL of scheme http, https or socks5 with a host; nil otherwise.
    init?(url text: String) {
        // socks5h (the proxy resolves names) is socks5 to Go's transport, and here.
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            let kind = Kind(rawValue: scheme == "socks5h" ? "socks5" : scheme),
            let rawHost = components.host, !rawHost.isEmpty
        else { return nil }
        let host = rawHost.hasPrefix("[") && rawHost.hasSuffix("]") ? String(rawHost.dropFirst().dropLast()) : rawHost
        let port: Int
        if let given = components.port {
            guard (1...65535).contains(given) else { return nil }
            port = given
        } else {
            switch kind {
            case .http: port = 80
            case .https: port = 443
            case .socks5: port = 1080
            }
        }
        self.init(kind: kind, host: host, port: port, username: components.user, password: components.password)
    }

    /// `Basic <base64(user:password)>` when the URL had a user, as Go sends it to an HTTP proxy.
    public var authorization: String? {
        guard let username else { return nil }
        let pair = Array((username + ":" + (password ?? "")).utf8)
        return "Basic " + Data(pair).base64EncodedString()
    }

    /// The proxy's `host:port` (brackets around an IPv6 address).
    public var address: String {
        (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
    }

    public var description: String { "\(kind.rawValue)://\(address)" }

    /// Without the password (`dump`, test failures).
    public var customMirror: Mirror {
        Mirror(self, children: ["kind": kind, "host": host, "port": port, "username": username as Any])
    }
}

/// Why a request could not go through its proxy.
public enum ProxyError: Error, Sendable, Equatable, CustomStringConvertible, CustomReflectable {
    /// The proxy variable is a URL of a scheme other than http, https and socks5, or without
    /// a host (its text is kept out of descriptions and mirrors).
    case invalidProxy(String)
    /// `HTTP_PROXY` is set while `REQUEST_METHOD` is (Go's CGI rule).
    case refusedInCGI
    /// A kind of proxy this dial cannot use (SOCKS5 or https for DERP), or a target it
    /// cannot carry.
    case unsupported(ProxyServer, String)
    /// The connection to the proxy failed otherwise (TLS to an `https://` proxy: its
    /// certificate refused, say), with the cause.
    case failed(proxy: ProxyServer, String)
    /// The proxy answered CONNECT with something other than 200.
    case refused(proxy: ProxyServer, target: String, status: Int, reason: String)
    /// The proxy's answer to CONNECT was not HTTP, or too long.
    case malformedAnswer(proxy: ProxyServer, String)
    /// The proxy closed the connection before answering CONNECT (or, SOCKS5, before it
    /// connected to the target).
    case closed(proxy: ProxyServer)
    /// A SOCKS5 proxy refused to connect to the target (its reply's meaning).
    case socksRefused(proxy: ProxyServer, target: String, reason: String)
    /// A SOCKS5 proxy's answer broke the protocol.
    case socksFailed(proxy: ProxyServer, target: String, reason: String)
    /// The target's certificate does not name the target (its DNS name, or its IP address).
    case certificateNotForTarget(String)

    public var customMirror: Mirror { Mirror(self, children: ["description": description]) }

    public var description: String {
        switch self {
        case .invalidProxy:
            // The value may hold credentials: it is not repeated.
            return "invalid proxy address in HTTP_PROXY or HTTPS_PROXY"
        case .refusedInCGI:
            return "refusing to use HTTP_PROXY value in CGI environment; see golang.org/s/cgihttpproxy"
        case .unsupported(let proxy, let why):
            return "proxy \(proxy): \(why)"
        case .refused(let proxy, let target, let status, let reason):
            return "proxy \(proxy) refused CONNECT \(target): \(status) \(reason)"
        case .malformedAnswer(let proxy, let why):
            return "proxy \(proxy) answered CONNECT with \(why)"
        case .closed(let proxy) where proxy.kind == .socks5:
            return "proxy \(proxy) closed the connection before connecting to the target"
        case .closed(let proxy):
            return "proxy \(proxy) closed the connection before answering CONNECT"
        case .socksRefused(let proxy, let target, let reason):
            return "proxy \(proxy) refused to connect to \(target): \(reason)"
        case .socksFailed(let proxy, let target, let reason):
            return "proxy \(proxy), connecting to \(target): \(reason)"
        case .failed(let proxy, let why):
            return "proxy \(proxy): \(why)"
        case .certificateNotForTarget(let target):
            return "the certificate is not valid for \(target)"
        }
    }
}
