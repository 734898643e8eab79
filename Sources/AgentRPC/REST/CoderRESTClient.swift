import AgentCore
import AsyncHTTPClient
import FoundationEssentials
import NIOCore
import NIOHTTP1
import NIOPosix
import OutboundProxy

/// coderd's REST API as the agent: `Coder-Session-Token` and the deployment's extra headers
/// (`--agent-header`) on every request, each answer at most ``maxResponseBytes`` and
/// ``timeout`` long (the reference's SDK timeout). What the in-workspace commands (external
/// auth, the git SSH key) and the instance-identity exchanges call.
public struct CoderRESTClient: CoderRESTRequesting {
    /// An answer larger than this is refused (coderd's answers here are small JSON objects).
    public static let maxResponseBytes = 1 << 20
    /// The reference's agent SDK timeout for one request.
    public static let timeout: Duration = .seconds(30)

    /// The access URL without a trailing slash, e.g. `https://coder.example.com`.
    public let baseURL: String
    /// Sent as `Coder-Session-Token`; nil sends none (the instance-identity exchanges).
    public let token: String?
    /// Added to every request, after the client's own (never logged).
    public let headers: [(String, String)]
    /// The HTTP client, or why the proxy the environment names for coderd cannot be used
    /// (each request then fails with that reason).
    private let client: Result<HTTPClient, ProxyError>

    /// The process's client configuration for coderd: a refused or failed connect fails its
    /// request at once (AsyncHTTPClient's default retries it until the connect timeout, so git
    /// waited 30 s for an askpass whose control plane was down); 10 s to connect.
    static let sharedConfiguration: HTTPClient.Configuration = {
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow, timeout: .init(connect: .seconds(10)))
        configuration.connectionPool.retryConnectionEstablishment = false
        return configuration
    }()

    /// The process's direct client for coderd. Lives for the process.
    public static let sharedClient = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: sharedConfiguration)

    /// The process's clients for coderd, direct or through the environment's proxy.
    public static let sharedClients = SharedHTTPClients(configuration: sharedConfiguration, direct: sharedClient)

    /// - Parameters:
    ///   - client: the HTTP client; nil takes the process's, through the proxy that `proxies`
    ///     names for `baseURL` (Go's `ProxyFromEnvironment`), if any.
    public init(
        baseURL: String, token: String?, headers: [(String, String)] = [], client: HTTPClient? = nil, proxies: ProxyEnvironment = .process
    ) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        if base.hasPrefix("wss://") { base = "https://" + base.dropFirst("wss://".count) }
        if base.hasPrefix("ws://") { base = "http://" + base.dropFirst("ws://".count) }
        self.init(
            baseURL: base, token: token, headers: headers,
            client: client.map { .success($0) } ?? Self.sharedClients.client(for: base, proxies: proxies))
    }

    private init(baseURL: String, token: String?, headers: [(String, String)], client: Result<HTTPClient, ProxyError>) {
        self.baseURL = baseURL
        self.token = token
        self.headers = headers
        self.client = client
    }

    /// The same client with another token (an exchanged one).
    public func with(token: String?) -> CoderRESTClient {
        CoderRESTClient(baseURL: baseURL, token: token, headers: headers, client: client)
    }

    /// The client, or the proxy's failure as this request's.
    private func httpClient(_ method: String, _ address: String) throws(CoderRESTError) -> HTTPClient {
        switch client {
        case .success(let client): return client
        case .failure(let error): throw .connection(method: method, url: address, reason: error.description)
        }
    }

    /// The URL of `path` with `query` (each name and value percent-encoded).
    public func url(_ path: String, query: [(String, String)] = []) -> String {
        var text = baseURL + path
        if !query.isEmpty {
            text += "?" + query.map { Self.encode($0.0) + "=" + Self.encode($0.1) }.joined(separator: "&")
        }
        return text
    }

    public func send(
        _ method: String, _ path: String, query: [(String, String)], json body: [UInt8]?, timeout: Duration
    ) async throws(CoderRESTError) -> CoderRESTResponse {
        try await send(HTTPMethod(rawValue: method), path, query: query, json: body, timeout: timeout)
    }

    /// Sends one request and reads its whole answer. A JSON `body` is sent with
    /// `Content-Type: application/json`.
    public func send(
        _ method: HTTPMethod, _ path: String, query: [(String, String)] = [], json body: [UInt8]? = nil,
        timeout: Duration = CoderRESTClient.timeout
    ) async throws(CoderRESTError) -> CoderRESTResponse {
        let address = url(path, query: query)
        let request = makeRequest(method, address, json: body)
        let client = try httpClient(method.rawValue, address)
        do {
            let response = try await client.execute(request, timeout: Self.timeAmount(timeout))
            let bytes = try await response.body.collect(upTo: Self.maxResponseBytes)
            return CoderRESTResponse(method: method.rawValue, url: address, status: Int(response.status.code), body: Array(bytes.readableBytesView))
        } catch is NIOTooManyBytesError {
            throw .tooLarge(method: method.rawValue, url: address, limit: Self.maxResponseBytes)
        } catch {
            throw .connection(method: method.rawValue, url: address, reason: Self.describe(error))
        }
    }

    /// Opens a streamed answer (server-sent events): its status, then its body's chunks as
    /// they arrive, each at most ``maxResponseBytes``. No overall timeout: the caller ends it
    /// by cancelling its task.
    public func open(
        _ path: String, query: [(String, String)] = [], connectTimeout: Duration = CoderRESTClient.timeout
    )
        async throws(CoderRESTError) -> (status: Int, body: HTTPClientResponse.Body)
    {
        let address = url(path, query: query)
        var request = makeRequest(.GET, address, json: nil)
        request.headers.replaceOrAdd(name: "Accept", value: "text/event-stream")
        let client = try httpClient("GET", address)
        do {
            let deadline = NIODeadline.now() + Self.timeAmount(connectTimeout)
            let response = try await client.execute(request, deadline: deadline)
            return (Int(response.status.code), response.body)
        } catch {
            throw .connection(method: "GET", url: address, reason: Self.describe(error))
        }
    }

    private func makeRequest(_ method: HTTPMethod, _ address: String, json body: [UInt8]?) -> HTTPClientRequest {
        var request = HTTPClientRequest(url: address)
        request.method = method
        request.headers.add(name: "Accept", value: "application/json")
        if let token { request.headers.add(name: "Coder-Session-Token", value: token) }
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body {
            request.headers.replaceOrAdd(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        return request
    }

    static func timeAmount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .connectTimeout: return "context deadline exceeded"
            case .remoteConnectionClosed: return "EOF"
            default: return "\(error)"
            }
        }
        // Go's words for the common refusal (NIO's text names the system call and errno).
        if "\(error)".contains("Connection refused") { return "connect: connection refused" }
        return "\(error)"
    }

    /// RFC 3986 unreserved characters kept; everything else percent-encoded.
    static func encode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".utf8)
                out += "%" + String(decoding: [hex[Int(byte >> 4)], hex[Int(byte & 15)]], as: UTF8.self)
            }
        }
        return out
    }
}
