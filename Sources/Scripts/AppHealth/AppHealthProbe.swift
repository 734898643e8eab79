import AgentTLS
import AgentCore
import FoundationEssentials
import NIOCore
import NIOHTTP1
import NIOPosix
import OutboundProxy

/// One app health check: `GET url`, healthy when the answer's
/// status is below 500. The body is never read: the connection is closed as soon as the
/// response head has arrived. A 5xx, any transport or TLS error, or no answer within the
/// timeout is a failure.
///
/// Like Go's default client it follows redirects (301, 302, 303, 307 and 308 with a
/// `Location`, resolved against the current URL, always as a GET since the check has no
/// body), with Go's limit: at most 10 requests in all; a 10th answer that is still a
/// redirect fails the check (`stopped after 10 redirects`). A redirect without `Location`
/// is an answer like any other (healthy: its status is below 500). Each request is a new
/// connection (`Connection: close`, no pooling: checks are seconds apart).
///
/// Like Go's default client it goes through the proxy that `HTTP_PROXY`/`HTTPS_PROXY`/
/// `NO_PROXY` name for each URL (apps on loopback, the usual case, never): an http check as the
/// proxy's own request (absolute-form), an https one through its `CONNECT`. Differences from
/// the reference, on purpose: no cookies across redirects; no `Accept-Encoding: gzip` (the
/// body is not read anyway).
///
/// https uses the system trust store; the certificate must name the URL's host as Go checks it
/// (``OutboundProxy/ProxyRoute/tlsClientHandler(context:host:serverName:)``: an IP literal
/// against the certificate's IP addresses, never the connected address alone).
///
/// Runs on `group`'s event loops (default: NIO's shared singleton), never blocking the
/// caller's thread; the TLS context, which reads the trust store from disk, is made once,
/// on NIO's thread pool.
///
/// Names are looked up on the probe's own threads (``lookups``: 2, with 8 lookups waiting,
/// beyond which a check fails at once), never on NIO's per-event-loop resolver queue, which
/// the control plane's and the relays' dials share: a redirect to a name whose DNS never
/// answers had held those for as long as the lookup hung. An address needs no lookup.
///
/// Memory: per check one connection and one response head (NIO's HTTP decoder bounds the
/// head at 80 KiB); nothing survives the check but the cached TLS context.
public struct AppHealthProbe: Sendable {
    /// What one check found.
    public enum Outcome: Sendable, Equatable, CustomStringConvertible {
        /// An answer below 500 (its status).
        case healthy(status: Int)
        /// Why the check failed: `status 503`, a transport error's text, `timed out`.
        case failed(String)

        public var isHealthy: Bool {
            if case .healthy = self { return true }
            return false
        }

        public var description: String {
            switch self {
            case .healthy(let status): "healthy (status \(status))"
            case .failed(let reason): "failed: \(reason)"
            }
        }
    }

    /// Requests per check at most, redirects included (Go's `defaultCheckRedirect`).
    public static let maxRequests = 10

    /// Where the checks' name lookups run (a lookup can block for the resolver's timeouts).
    static let lookups = BlockingPool(name: "app-health-dns", threads: 2, maxQueued: 8)

    private let group: any EventLoopGroup
    private let tlsConfiguration: TLSConfiguration
    private let proxies: ProxyEnvironment

    /// A probe running on `group`, with `tlsConfiguration` for https URLs (default: the
    /// system trust store, full verification).
    public init(
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        tlsConfiguration: TLSConfiguration = .makeClientConfiguration(), proxies: ProxyEnvironment = .process
    ) {
        self.group = group
        self.tlsConfiguration = tlsConfiguration
        self.proxies = proxies
    }

    /// Checks `url` once, within `timeout` for the whole check (redirects included). Returns
    /// early as a failure when the calling task is cancelled.
    public func check(_ url: String, timeout: Duration) async -> Outcome {
        let deadline = NIODeadline.now() + .nanoseconds(Self.nanoseconds(timeout))
        guard var current = URL(string: url) else { return .failed("invalid URL \"\(url)\"") }
        for request in 1...Self.maxRequests {
            guard let target = Target(current) else { return .failed("unsupported URL \"\(current.absoluteString)\"") }
            let head: HTTPResponseHead
            do {
                head = try await fetchHead(target, deadline: deadline)
            } catch {
                return .failed("\(error)")
            }
            let status = Int(head.status.code)
            if [301, 302, 303, 307, 308].contains(status), let location = head.headers.first(name: "location") {
                guard request < Self.maxRequests else { return .failed("stopped after \(Self.maxRequests) redirects") }
                guard let next = URL(string: location, relativeTo: current)?.absoluteURL else {
                    return .failed("failed to parse Location header \"\(location)\"")
                }
                current = next
                continue
            }
            return status < 500 ? .healthy(status: status) : .failed("status \(status)")
        }
        return .failed("stopped after \(Self.maxRequests) redirects")
    }

    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return max(0, seconds) * 1_000_000_000 + max(0, attoseconds) / 1_000_000_000
    }

    /// Where one request goes.
    struct Target: Sendable {
        var secure: Bool
        var host: String
        var port: Int
        var hostHeader: String
        var pathAndQuery: String

        init?(_ url: URL) {
            switch url.scheme?.lowercased() {
            case "http": secure = false
            case "https": secure = true
            default: return nil
            }
            guard let host = url.host, !host.isEmpty else { return nil }
            self.host = host
            port = url.port ?? (secure ? 443 : 80)
            // Go refuses such a port; getaddrinfo would wrap it (70000 is 4464).
            guard (1...65535).contains(port) else { return nil }
            let bracketed = host.contains(":") ? "[\(host)]" : host
            hostHeader = url.port.map { "\(bracketed):\($0)" } ?? bracketed
            var path = url.path(percentEncoded: true)
            if path.isEmpty { path = "/" }
            if let query = url.query(percentEncoded: true) { path += "?\(query)" }
            pathAndQuery = path
        }

        /// The name for SNI and certificate checks (nil for an IP literal, which the
        /// certificate must name as an address).
        var serverName: String? { ProxyRoute.serverName(for: host) }
    }

    /// Why a request ended without an answer (the other failures are NIO's own errors).
    struct RequestFailure: Error, CustomStringConvertible {
        var description: String
    }

    /// Connects, sends the GET, waits for the response head, closes.
    private func fetchHead(_ target: Target, deadline: NIODeadline) async throws -> HTTPResponseHead {
        let route: ProxyRoute
        do {
            route = try ProxyRoute.choose(
                scheme: target.secure ? "https" : "http", host: target.host, port: target.port, environment: proxies, anyProxyKind: true)
        } catch {
            throw RequestFailure(description: error.description)
        }
        let serverName = target.serverName
        // The target's TLS, and an https:// proxy's, with the same trust.
        let ssl = target.secure || route.proxyTLS ? try await TLSContextCache.shared.context(for: tlsConfiguration, deadline: deadline) : nil
        let loop = group.next()
        let promise = loop.makePromise(of: HTTPResponseHead.self)
        let remaining = deadline - .now()
        guard remaining > .zero else {
            promise.fail(RequestFailure(description: "timed out"))
            throw RequestFailure(description: "timed out")
        }
        let timer = loop.scheduleTask(deadline: deadline) { promise.fail(RequestFailure(description: "timed out")) }
        promise.futureResult.whenComplete { _ in timer.cancel() }
        // Through a forwarding proxy the request names the whole URL, with the credentials.
        let (uri, authorization) = route.requestTarget(hostHeader: target.hostHeader, pathAndQuery: target.pathAndQuery)
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: uri)
        head.headers.add(name: "Host", value: target.hostHeader)
        if let authorization { head.headers.add(name: "Proxy-Authorization", value: authorization) }
        head.headers.add(name: "User-Agent", value: "Go-http-client/1.1")
        head.headers.add(name: "Connection", value: "close")
        let request = head
        let makeBootstrap: @Sendable () -> ClientBootstrap = {
            ClientBootstrap(group: loop)
                .connectTimeout(remaining)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let pipeline = channel.pipeline.syncOperations
                        try route.addHandlers(to: pipeline, host: target.host, port: target.port, proxyContext: ssl)
                        if target.secure, let ssl { try pipeline.addHandler(route.tlsClientHandler(context: ssl, host: target.host, serverName: serverName)) }
                        try pipeline.addHTTPClientHandlers()
                        try pipeline.addHandler(ResponseHeadHandler(request: request, promise: promise))
                    }
                }
        }
        let destination = route.connectAddress(host: target.host, port: target.port)
        let addresses: [SocketAddress]
        do {
            addresses = try await NameLookup.addresses(destination.host, port: destination.port, deadline: deadline, pool: Self.lookups)
        } catch {
            promise.fail(error)
            throw error
        }
        NameLookup.connect(to: addresses[...]) { makeBootstrap().connect(to: $0) }.whenComplete { result in
            switch result {
            case .success(let channel):
                // Done either way (head, error, timeout, cancel): the connection goes.
                promise.futureResult.whenComplete { _ in channel.close(promise: nil) }
            case .failure(let error):
                promise.fail(error)
            }
        }
        return try await withTaskCancellationHandler {
            try await promise.futureResult.get()
        } onCancel: {
            promise.fail(CancellationError())
        }
    }
}
