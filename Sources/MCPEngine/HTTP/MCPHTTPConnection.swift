import AgentCore
import AsyncHTTPClient
import FoundationEssentials
import NIOCore
import NIOHTTP1
import NIOPosix

/// Why an HTTP exchange failed: the connection (the server went away: the session ends) or
/// the answer (this request fails, the session goes on).
enum MCPHTTPFailure: Error {
    /// Connecting, sending or reading failed (`text` says how).
    case connection(String)
    /// The server answered something the client refuses (a status, a redirect, a body).
    case refused(String)
    /// The exchange's task was cancelled.
    case cancelled
}

/// One server's HTTP client: its own `HTTPClient` on the process's shared NIO event loops
/// (no threads of its own; shut down when the session closes), the entry's static headers
/// on every request, and redirects followed by hand (at most ``maxRedirects``, never to
/// another origin, so never from https to http and never taking the headers elsewhere).
final class MCPHTTPConnection: Sendable {
    /// Redirects followed for one request.
    static let maxRedirects = 10
    /// Bytes of an error answer's body quoted in the error.
    static let errorBodyBytes = 512
    /// Header names the transport sets itself: an entry's header of the same name is ignored.
    static let reservedHeaders: Set<String> = [
        "content-type", "accept", "mcp-session-id", "mcp-protocol-version", "last-event-id",
        "host", "content-length", "transfer-encoding", "connection",
    ]

    let serverName: String
    let origin: MCPHTTPOrigin
    private let client: HTTPClient
    private let staticHeaders: [(String, String)]

    init(serverName: String, origin: MCPHTTPOrigin, headers: [String: String], connectTimeout: Duration) {
        self.serverName = serverName
        self.origin = origin
        staticHeaders = headers.sorted { $0.key < $1.key }.filter { name, value in
            !Self.reservedHeaders.contains(name.lowercased()) && Self.isToken(name) && !value.utf8.contains { $0 < 0x20 && $0 != 0x09 || $0 == 0x7f }
        }
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow, timeout: .init(connect: connectTimeout.timeAmount), decompression: .disabled)
        // A call's answer streams on its own connection for as long as the call runs: room for
        // every exchange the transport allows at once, none queued behind another.
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = MCPHTTPExchanges.maxInFlight
        // A refused connection fails its request at once rather than being retried until the
        // connect timeout: the engine reconnects with its own back-off.
        configuration.connectionPool.retryConnectionEstablishment = false
        client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
    }

    /// Sends `method` to `url` with the static headers and `headers` (which win), following
    /// redirects; returns the answer (its body not read yet) and the URL that gave it.
    /// `deadline` bounds the wait for the answer's head, never its body.
    func execute(
        _ method: HTTPMethod, _ url: URL, headers: [(String, String)], body: [UInt8]?, deadline: NIODeadline
    ) async throws(MCPHTTPFailure) -> (HTTPClientResponse, URL) {
        var current = url
        for _ in 0...Self.maxRedirects {
            var request = HTTPClientRequest(url: current.absoluteString)
            request.method = method
            for (name, value) in staticHeaders { request.headers.add(name: name, value: value) }
            for (name, value) in headers { request.headers.replaceOrAdd(name: name, value: value) }
            if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
            let response: HTTPClientResponse
            do {
                response = try await client.execute(request, deadline: deadline)
            } catch {
                if Task.isCancelled || error is CancellationError { throw .cancelled }
                throw .connection("\(method) \(current.absoluteString): \(Self.describe(error))")
            }
            guard [301, 302, 303, 307, 308].contains(response.status.code), let location = response.headers.first(name: "location") else {
                return (response, current)
            }
            guard let next = URL(string: location, relativeTo: current)?.absoluteURL, let target = MCPHTTPOrigin(next) else {
                throw .refused("refusing redirect from \(current.absoluteString) to \(location): not a URL")
            }
            guard target == origin else {
                throw .refused("refusing redirect from \(current.absoluteString) to \(next.absoluteString): another origin")
            }
            current = next
        }
        throw .refused("\(method) \(url.absoluteString): stopped after \(Self.maxRedirects) redirects")
    }

    /// `HTTP <code>: <the first bytes of the body>`, for an answer that is an error.
    static func statusText(_ response: HTTPClientResponse) async -> String {
        var bytes: [UInt8] = []
        do {
            for try await chunk in response.body {
                bytes.append(contentsOf: chunk.readableBytesView.prefix(errorBodyBytes - bytes.count))
                if bytes.count >= errorBodyBytes { break }
            }
        } catch {}
        let text = trimmed(String(decoding: bytes, as: UTF8.self))
        return text.isEmpty ? "HTTP \(response.status.code)" : "HTTP \(response.status.code): \(text)"
    }

    /// The whole body of an answer that holds one JSON message: at most
    /// ``MCPLimits/maxMessageBytes``, never buffering more.
    static func readMessage(_ response: HTTPClientResponse) async throws(MCPHTTPFailure) -> [UInt8] {
        let limit = MCPLimits.maxMessageBytes
        if let length = response.headers.first(name: "content-length").flatMap(Int.init), length > limit {
            throw .refused("the server sent a message longer than \(limit) bytes")
        }
        var bytes: [UInt8] = []
        do {
            for try await chunk in response.body {
                guard bytes.count + chunk.readableBytes <= limit else {
                    throw MCPHTTPFailure.refused("the server sent a message longer than \(limit) bytes")
                }
                bytes.append(contentsOf: chunk.readableBytesView)
            }
        } catch let failure as MCPHTTPFailure {
            throw failure
        } catch {
            if Task.isCancelled || error is CancellationError { throw .cancelled }
            throw .connection("reading the answer: \(describe(error))")
        }
        return bytes
    }

    /// Reads a `text/event-stream` body, calling `event` with each event until it returns
    /// false or the stream ends (true then); an event over ``MCPLimits/maxMessageBytes``
    /// fails.
    static func readEvents(_ response: HTTPClientResponse, _ event: (SSEEvent) -> Bool) async throws(MCPHTTPFailure) -> Bool {
        var decoder = SSEDecoder()
        var going = true
        do {
            for try await chunk in response.body {
                try chunk.withUnsafeReadableBytes { raw throws(SSEDecoder.EventTooLong) in
                    try decoder.feed(raw) { if going { going = event($0) } }
                }
                if !going { return false }
            }
        } catch let tooLong as SSEDecoder.EventTooLong {
            throw .refused("the server sent a \(tooLong.description)")
        } catch {
            if Task.isCancelled || error is CancellationError { throw .cancelled }
            throw .connection("reading the event stream: \(describe(error))")
        }
        return true
    }

    /// The media type of an answer, lower-cased, without parameters.
    static func mediaType(_ response: HTTPClientResponse) -> String {
        let value = response.headers.first(name: "content-type") ?? ""
        return trimmed(String(value.prefix { $0 != ";" })).lowercased()
    }

    /// Shuts the client down (its connections closed); waits for it.
    func shutdown() async {
        try? await client.shutdown()
    }

    /// An error of the HTTP client in a few words.
    static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPClientError {
            switch error {
            case .connectTimeout: return "connect timed out"
            case .remoteConnectionClosed: return "the server closed the connection"
            case .readTimeout: return "read timed out"
            case .deadlineExceeded: return "timed out"
            default: return "\(error)"
            }
        }
        if let error = error as? NIOConnectionError, let first = error.connectionErrors.first {
            return describe(first.error)
        }
        if let error = error as? IOError { return SystemCallError.message(error.errnoCode) }
        return "\(error)"
    }

    static func trimmed(_ text: String) -> String {
        String(text.drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
    }

    private static func isToken(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5a).contains(byte) || (0x61...0x7a).contains(byte)
                || "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}

/// A URL's origin: scheme, host and port (the scheme's default when absent).
struct MCPHTTPOrigin: Sendable, Equatable, CustomStringConvertible {
    var scheme: String
    var host: String
    var port: Int

    init?(_ url: URL) {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host?.lowercased(), !host.isEmpty
        else { return nil }
        self.scheme = scheme
        self.host = host
        port = url.port ?? (scheme == "https" ? 443 : 80)
    }

    var description: String { "\(scheme)://\(host):\(port)" }
}

extension Duration {
    /// The duration as NIO's `TimeAmount` (nanoseconds).
    var timeAmount: TimeAmount {
        let (seconds, attoseconds) = components
        return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
