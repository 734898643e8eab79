import AgentTLS
import AgentCore
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
    /// How requests travel: on the agent's own client (its route from the environment's
    /// proxy for the access URL, coderd's certificate checked as Go checks it), or why the
    /// proxy the environment names cannot be used (each request then fails with that reason).
    enum Transport: Sendable {
        case checked(CheckedHTTPClient)
        case failed(String)
    }
    private let transport: Transport

    /// - Parameters:
    ///   - proxies: the environment whose proxy for `baseURL` requests go through (Go's
    ///     `ProxyFromEnvironment`), if any.
    ///   - tlsConfiguration: the trust for an `https://` access URL (nil: the system's store).
    public init(
        baseURL: String, token: String?, headers: [(String, String)] = [], proxies: ProxyEnvironment = .process,
        tlsConfiguration: TLSConfiguration? = nil
    ) {
        let credentials = AccessURLCredentials(baseURL)
        var base = credentials.url
        while base.hasSuffix("/") { base.removeLast() }
        if base.hasPrefix("wss://") { base = "https://" + base.dropFirst("wss://".count) }
        if base.hasPrefix("ws://") { base = "http://" + base.dropFirst("ws://".count) }
        let transport: Transport
        do {
            let route = try ProxyRoute.choose(url: base, environment: proxies, anyProxyKind: true)
            transport = .checked(try CheckedHTTPClient(route: route, tlsConfiguration: tlsConfiguration))
        } catch {
            transport = .failed("\(error)")
        }
        self.init(baseURL: base, token: token, headers: credentials.adding(to: headers), transport: transport)
    }

    private init(baseURL: String, token: String?, headers: [(String, String)], transport: Transport) {
        self.baseURL = baseURL
        self.token = token
        self.headers = headers
        self.transport = transport
    }

    /// The same client with another token (an exchanged one).
    public func with(token: String?) -> CoderRESTClient {
        CoderRESTClient(baseURL: baseURL, token: token, headers: headers, transport: transport)
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
        let headers = requestHeaders(json: body != nil)
        do {
            switch transport {
            case .failed(let reason):
                throw CoderRESTError.connection(method: method.rawValue, url: address, reason: reason)
            case .checked(let checked):
                let request = try Self.checkedRequest(method, address, headers: headers, body: body)
                return try await checked.execute(request, deadline: .now() + TimeAmount(timeout)) { head, chunks in
                    let bytes = try await chunks.collect(upTo: Self.maxResponseBytes)
                    return CoderRESTResponse(method: method.rawValue, url: address, status: Int(head.status.code), body: bytes)
                }
            }
        } catch let error as CoderRESTError {
            throw error
        } catch is NIOTooManyBytesError {
            throw .tooLarge(method: method.rawValue, url: address, limit: Self.maxResponseBytes)
        } catch {
            throw .connection(method: method.rawValue, url: address, reason: Self.describe(error))
        }
    }

    /// Opens a streamed answer (server-sent events) and hands its status and body's chunks,
    /// as they arrive, to `consume`; the request ends when `consume` returns. `connectTimeout`
    /// bounds the wait for the answer's head only: the caller ends the stream by returning or
    /// by cancelling its task. A failure to get the answer throws ``CoderRESTError``;
    /// `consume`'s own errors, and the body's, pass through.
    public func stream<Result: Sendable>(
        _ path: String, query: [(String, String)] = [], connectTimeout: Duration = CoderRESTClient.timeout,
        _ consume: (_ status: Int, _ body: CoderRESTStream) async throws -> Result
    ) async throws -> Result {
        let address = url(path, query: query)
        var headers = requestHeaders(json: false)
        headers.replaceOrAdd(name: "Accept", value: "text/event-stream")
        let deadline = NIODeadline.now() + TimeAmount(connectTimeout)
        switch transport {
        case .failed(let reason):
            throw CoderRESTError.connection(method: "GET", url: address, reason: reason)
        case .checked(let checked):
            let request = try Self.checkedRequest(.GET, address, headers: headers, body: nil)
            // The consumer's errors are carried out unchanged; the rest are the request's.
            let outcome: Swift.Result<Result, any Error>
            do {
                outcome = try await checked.execute(request, deadline: deadline, scope: .head) { head, chunks in
                    do {
                        return .success(try await consume(Int(head.status.code), CoderRESTStream(chunks)))
                    } catch {
                        return .failure(error)
                    }
                }
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                throw CoderRESTError.connection(method: "GET", url: address, reason: Self.describe(error))
            }
            return try outcome.get()
        }
    }

    /// The headers of every request: `Accept`, the token, the deployment's extra headers and,
    /// with a JSON body, its content type.
    private func requestHeaders(json: Bool) -> HTTPHeaders {
        var headers = HTTPHeaders([("Accept", "application/json")])
        if let token { headers.add(name: "Coder-Session-Token", value: token) }
        for (name, value) in self.headers { headers.add(name: name, value: value) }
        if json { headers.replaceOrAdd(name: "Content-Type", value: "application/json") }
        return headers
    }

    private static func checkedRequest(
        _ method: HTTPMethod, _ address: String, headers: HTTPHeaders, body: [UInt8]?
    ) throws(CoderRESTError) -> CheckedHTTPClient.Request {
        guard let request = CheckedHTTPClient.Request(method: method, url: address, headers: headers.map { ($0.name, $0.value) }, body: body)
        else { throw .connection(method: method.rawValue, url: address, reason: "not an http:// or https:// URL with a port in 1...65535") }
        return request
    }

    static func describe(_ error: any Error) -> String {
        // A connect that timed out is Go's context deadline too (its dial shares the SDK's).
        if let error = error as? CheckedHTTPError { return error == .setupTimedOut ? "context deadline exceeded" : error.description }
        if case ChannelError.connectTimeout = error { return "context deadline exceeded" }
        // Go's `io.ErrUnexpectedEOF` for an answer cut short, with or without TLS's close.
        if let error = error as? HTTPParserError, error == .invalidEOFState { return "unexpected EOF" }
        if error as? TLSError == .uncleanShutdown { return "unexpected EOF" }
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

/// Neither the token nor the headers' values: a service holding a client is described in the
/// logs (ServiceLifecycle logs each service it starts), and `--agent-header` values are
/// secrets (an access proxy's token).
extension CoderRESTClient: CustomStringConvertible, CustomReflectable {
    public var description: String {
        "CoderRESTClient(\(baseURL), token: \(token == nil ? "none" : "set"), headers: \(headers.map(\.0)))"
    }

    public var customMirror: Mirror {
        Mirror(self, children: ["baseURL": baseURL, "headerNames": headers.map(\.0)])
    }
}
