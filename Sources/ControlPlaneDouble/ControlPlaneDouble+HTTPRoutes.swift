import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

/// One plain (not upgraded) HTTP request to the double: coderd's REST routes the agent's
/// helper commands call (external auth, the git SSH key, instance identity, reinit).
public struct DoubleHTTPRequest: Sendable {
    public var method: String
    /// The path without the query.
    public var path: String
    /// The query's items in order, percent-decoded; a name without `=` has value "".
    public var query: [(name: String, value: String)]
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    /// The first value of a query item, nil when absent.
    public func queryValue(_ name: String) -> String? { query.first { $0.name == name }?.value }
    /// The first value of a header (case-insensitive name).
    public func header(_ name: String) -> String? { headers.first { $0.name.lowercased() == name.lowercased() }?.value }
}

/// What a route answers: a whole body, or a stream of chunks (server-sent events) that ends
/// when the stream finishes or the client goes.
public struct DoubleHTTPResponse: Sendable {
    public enum Body: Sendable {
        case bytes([UInt8])
        case stream(AsyncStream<[UInt8]>)
    }

    public var status: Int
    public var headers: [(String, String)]
    public var body: Body

    public init(status: Int, headers: [(String, String)] = [("Content-Type", "application/json")], body: Body) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON answer: `json` is sent as it is.
    public static func json(_ status: Int, _ json: String) -> DoubleHTTPResponse {
        DoubleHTTPResponse(status: status, body: .bytes(Array(json.utf8)))
    }

    /// coderd's error body `{"message": …, "detail": …}` (detail left out when empty).
    public static func error(_ status: Int, _ message: String, detail: String = "") -> DoubleHTTPResponse {
        var object: [String: String] = ["message": message]
        if !detail.isEmpty { object["detail"] = detail }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return DoubleHTTPResponse(status: status, body: .bytes(Array(data)))
    }
}

extension ControlPlaneDouble {
    public typealias HTTPRouteHandler = @Sendable (DoubleHTTPRequest) async -> DoubleHTTPResponse

    /// A request body larger than this is answered 413 (coderd's own limit is larger; the
    /// double's routes take small JSON objects).
    static let maxRequestBody = 1 << 20

    /// Serves `method path` (exact path, any query) from now on; a later registration of the
    /// same route replaces the earlier one. Unregistered paths answer 404 as before.
    public func handleHTTP(_ method: String, _ path: String, _ handler: @escaping HTTPRouteHandler) {
        httpRoutes.withLock { routes in
            routes.removeAll { $0.method == method && $0.path == path }
            routes.append((method, path, handler))
        }
    }

    /// Every plain request the double received, in arrival order (tests check headers and
    /// queries; bodies are kept).
    public var httpRequests: [DoubleHTTPRequest] { receivedHTTP.withLock { $0 } }

    /// nil when `request` carries this double's agent token, else coderd's 401.
    public func agentAuthorization(_ request: DoubleHTTPRequest) -> DoubleHTTPResponse? {
        guard let presented = request.header("Coder-Session-Token"), !presented.isEmpty else {
            return .error(401, "Cookie \"coder_session_token\" must be provided.")
        }
        guard UUID(uuidString: presented) != nil else {
            return .error(401, "Workspace agent token invalid.", detail: "An agent token must be a valid UUIDv4.")
        }
        guard presented == token || acceptedTokens.withLock({ $0.contains(presented) }) else {
            return .error(401, "Workspace agent not authorized.", detail: "The agent cannot authenticate until the workspace provision job has been completed.")
        }
        return nil
    }

    /// The handler for `method path`, recording the request; nil when none is registered.
    func route(_ request: DoubleHTTPRequest) -> HTTPRouteHandler? {
        receivedHTTP.withLock { $0.append(request) }
        return httpRoutes.withLock { routes in
            routes.last { $0.method == request.method && $0.path == request.path }?.handler
        }
    }

    static func parseRequest(_ head: HTTPRequestHead, body: [UInt8]) -> DoubleHTTPRequest {
        let parts = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = parts.first.map(String.init) ?? head.uri
        var query: [(name: String, value: String)] = []
        if parts.count == 2 {
            for item in parts[1].split(separator: "&") {
                let pair = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                func decode(_ text: Substring) -> String {
                    String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(text)
                }
                query.append((decode(pair[0]), pair.count == 2 ? decode(pair[1]) : ""))
            }
        }
        return DoubleHTTPRequest(
            method: head.method.rawValue, path: path, query: query,
            headers: head.headers.map { ($0.name, $0.value) }, body: body)
    }
}

/// Writes a route's answer on `channel`, then closes it (one request a connection).
enum DoubleHTTPWriter {
    static func write(_ response: DoubleHTTPResponse, on channel: any Channel) async {
        var headers = HTTPHeaders()
        for (name, value) in response.headers { headers.add(name: name, value: value) }
        headers.add(name: "Connection", value: "close")
        let status = HTTPResponseStatus(statusCode: response.status)
        switch response.body {
        case .bytes(let bytes):
            headers.add(name: "Content-Length", value: "\(bytes.count)")
            let head = HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))
            channel.write(head, promise: nil)
            channel.write(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(bytes: bytes))), promise: nil)
            try? await channel.writeAndFlush(HTTPServerResponsePart.end(nil)).get()
        case .stream(let chunks):
            headers.add(name: "Transfer-Encoding", value: "chunked")
            let head = HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))
            guard (try? await channel.writeAndFlush(head).get()) != nil else { return }
            // Cancelled when the client goes: the stream's iteration then ends at once.
            let pump = Task {
                for await chunk in chunks {
                    guard (try? await channel.writeAndFlush(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(bytes: chunk)))).get()) != nil
                    else { return }
                }
                try? await channel.writeAndFlush(HTTPServerResponsePart.end(nil)).get()
            }
            channel.closeFuture.whenComplete { _ in pump.cancel() }
            await pump.value
        }
        try? await channel.close()
    }
}
