import AsyncHTTPClient
import NIOPosix
import Synchronization

/// Process-wide AsyncHTTPClient clients that differ only in their proxy: one per purpose
/// (its configuration) and proxy, made on first use and kept for the process's life, as the
/// direct ones are. Bounded by the environment: it names at most two proxies, so a purpose has
/// at most three clients (tests that pass other environments add theirs).
public final class SharedHTTPClients: Sendable {
    private let configuration: HTTPClient.Configuration
    private let direct: HTTPClient
    private let proxied = Mutex<[ProxyServer: HTTPClient]>([:])

    /// `direct` serves requests that take no proxy; proxied clients copy `configuration`.
    public init(configuration: HTTPClient.Configuration, direct: HTTPClient) {
        self.configuration = configuration
        self.direct = direct
    }

    /// The client for a request to `url`, or why its proxy cannot be used.
    public func client(for url: String, proxies: ProxyEnvironment = .process) -> Result<HTTPClient, ProxyError> {
        let proxy: ProxyServer?
        do {
            proxy = try proxies.clientProxy(url: url)
        } catch {
            return .failure(error)
        }
        guard let proxy else { return .success(direct) }
        var routed = configuration
        do {
            try routed.route(through: proxy)
        } catch {
            return .failure(error)
        }
        return .success(
            proxied.withLock { clients in
                if let client = clients[proxy] { return client }
                let client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: routed)
                clients[proxy] = client
                return client
            })
    }
}
