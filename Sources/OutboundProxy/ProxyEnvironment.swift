import AgentSystem
import FoundationEssentials

/// Which proxy an outbound HTTP request takes, read from `HTTP_PROXY`, `HTTPS_PROXY` and
/// `NO_PROXY` (or their lowercase forms) as Go's `ProxyFromEnvironment` reads them, so the
/// agent reaches coderd, DERP relays, MCP servers and cloud metadata the way the reference
/// does behind an egress proxy. A pure value: the process's own is read once (``process``).
public struct ProxyEnvironment: Sendable, Equatable, CustomStringConvertible, CustomReflectable {
    /// `REQUEST_METHOD` is set: as in Go, `HTTP_PROXY` is then refused (a CGI client may set it).
    public let cgi: Bool

    private let http: ProxyServer?
    private let https: ProxyServer?
    private let invalidHTTP: String?
    private let invalidHTTPS: String?
    private let rules: NoProxyRules

    public init(environment: [String: String]) {
        // Go's order: the uppercase name first, then the lowercase one; an empty value is unset.
        func any(_ names: String...) -> String {
            names.lazy.compactMap { environment[$0] }.first { !$0.isEmpty } ?? ""
        }
        // The raw values are not kept: they may hold credentials.
        cgi = !(environment["REQUEST_METHOD"] ?? "").isEmpty
        (http, invalidHTTP) = Self.parse(any("HTTP_PROXY", "http_proxy"))
        (https, invalidHTTPS) = Self.parse(any("HTTPS_PROXY", "https_proxy"))
        rules = NoProxyRules(any("NO_PROXY", "no_proxy"))
    }

    /// The proxies without their credentials (a value may hold a password).
    public var description: String {
        "ProxyEnvironment(http: \(http?.description ?? "none"), https: \(https?.description ?? "none"))"
    }

    public var customMirror: Mirror { Mirror(self, children: ["description": description]) }

    /// The agent's own environment, read on first use (as Go's transport reads it once).
    public static let process = ProxyEnvironment(environment: ProcessInfo.processInfo.environment)

    /// No proxy at all (tests, and callers that must not be proxied).
    public static let none = ProxyEnvironment(environment: [:])

    /// The proxy for a request to `scheme://host:port` (`http`, `https`, or `ws`/`wss`, which
    /// the WebSocket dial sends as http and https), or nil to connect directly: no proxy is set
    /// for the scheme, the host is `localhost` or a loopback address, or `NO_PROXY` names it.
    /// `host` is the URL's host without brackets; `port` nil means the scheme's default.
    /// Throws for a proxy value that is not a URL (Go fails the request the same way) and for
    /// `HTTP_PROXY` under CGI.
    public func proxy(scheme: String, host: String, port: Int?) throws(ProxyError) -> ProxyServer? {
        let secure: Bool
        switch scheme.lowercased() {
        case "https", "wss": secure = true
        case "http", "ws": secure = false
        default: return nil
        }
        let (server, invalid) = secure ? (https, invalidHTTPS) : (http, invalidHTTP)
        if server == nil, invalid == nil { return nil }
        if !secure, cgi { throw .refusedInCGI }
        guard Self.useProxy(host: host, port: port ?? (secure ? 443 : 80), rules: rules) else { return nil }
        if let invalid { throw .invalidProxy(invalid) }
        return server
    }

    /// ``proxy(scheme:host:port:)`` for a URL's text (`scheme://host[:port]/...`); nil for a
    /// URL without a host.
    public func proxy(url: String) throws(ProxyError) -> ProxyServer? {
        guard let target = URLTarget(url) else { return nil }
        return try proxy(scheme: target.scheme, host: target.host, port: target.port)
    }

    /// Go's `useProxy`: never for `localhost` or a loopback address, else unless a rule matches.
    static func useProxy(host: String, port: Int, rules: NoProxyRules) -> Bool {
        if host == "localhost" { return false }
        let address = IPAddressBytes(host)
        if let address, address.isLoopback { return false }
        return !rules.matches(host: host.trimmingWhitespace().lowercased(), port: port, address: address)
    }

    /// Go's `parseProxy`: a URL of scheme http, https, socks5 or socks5h, or else a bare
    /// `host[:port]` read as `http://value`; a value that parses as neither is ignored, as Go
    /// ignores it (requests go direct). A URL of another scheme, or without a host, is kept as
    /// invalid: Go keeps it too and its transport then misdials it; here each request that
    /// would use it fails with the reason. The second value is set for such a value.
    static func parse(_ value: String) -> (ProxyServer?, String?) {
        if value.isEmpty { return (nil, nil) }
        if let server = ProxyServer(url: value) { return (server, nil) }
        if !value.contains("://") {
            return (ProxyServer(url: "http://" + value), nil)
        }
        return URLComponents(string: value)?.scheme == nil ? (nil, nil) : (nil, value)
    }
}
