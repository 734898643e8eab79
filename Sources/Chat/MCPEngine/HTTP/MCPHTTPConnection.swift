import AgentCore
import FoundationEssentials
import NIOCore
import NIOHTTP1
import NIOPosix
import OutboundProxy
import Synchronization

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

/// An answer's status, headers and body, for the closure it is handed to (the connection
/// closes, or waits for the next request, when that returns).
struct MCPHTTPResponse: Sendable {
    let status: HTTPResponseStatus
    let headers: HTTPHeaders
    let body: CheckedHTTPClient.Body
}

/// One server's HTTP client: OutboundProxy's ``CheckedHTTPClient`` on the process's shared
/// NIO event loops (no threads of its own), an https server's certificate checked as Go
/// checks it, the entry's static headers on every request, and redirects followed by hand
/// (at most ``maxRedirects``, never to another origin, so never from https to http and never
/// taking the headers elsewhere).
///
/// Connections are kept alive between requests (``CheckedHTTPClient/KeepAlive``: at most 2
/// idle, each for at most 1 s, less if the server's `Keep-Alive: timeout` says so), so a
/// burst of messages pays one connect and one TLS handshake; one the client knows is closed
/// is never used, and none outlives the shortest idle timeout servers commonly keep. A
/// request whose connection closes before any answer is sent once more, on a new
/// connection, when the server may read it twice (``mayRepeat(_:)``): a `tools/call` never
/// is.
///
/// Behind a proxy (`HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY`, chosen for the server's origin as
/// Go's `ProxyFromEnvironment` chooses) every request goes through it: an https server
/// through its `CONNECT` tunnel, an http one forwarded to it, either through SOCKS5; a proxy
/// setting the client cannot use fails each request with the reason.
final class MCPHTTPConnection: Sendable {
    /// Where the servers' names are looked up (``NameLookup``): never NIO's per-loop resolver
    /// queue, which the control plane's dials share; 2 threads, 16 lookups waiting.
    static let lookups = BlockingPool(name: "mcp-dns", threads: 2, maxQueued: 16)

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
    /// The client, or why the proxy the environment names for this origin cannot be used.
    private let client: Result<CheckedHTTPClient, any Error>
    private let staticHeaders: [(String, String)]

    init(
        serverName: String, origin: MCPHTTPOrigin, headers: [String: String], connectTimeout: Duration,
        proxies: ProxyEnvironment = .process, keepAlive: CheckedHTTPClient.KeepAlive = .init()
    ) {
        self.serverName = serverName
        self.origin = origin
        staticHeaders = headers.sorted { $0.key < $1.key }.filter { name, value in
            !Self.reservedHeaders.contains(name.lowercased()) && Self.isToken(name) && !value.utf8.contains { $0 < 0x20 && $0 != 0x09 || $0 == 0x7f }
        }
        client = Result {
            let route = try ProxyRoute.choose(
                scheme: origin.scheme, host: origin.host, port: origin.port, environment: proxies, anyProxyKind: true)
            return try CheckedHTTPClient(route: route, connectTimeout: TimeAmount(connectTimeout), keepAlive: keepAlive, lookups: Self.lookups)
        }
    }

    /// Sends `method` to `url` with the static headers and `headers` (which win), following
    /// redirects, and hands the answer and the URL that gave it to `consume`; the connection
    /// closes (or, its whole answer arrived, waits for the next request) when `consume`
    /// returns. `deadline` bounds the wait for the answer's head, never
    /// its body (``statusText(_:deadline:)`` takes it again for the body). `replayable` says
    /// the request may be sent again after its connection closed with no answer, even though
    /// the server may have read it. `consume`'s ``MCPHTTPFailure`` passes through; its other
    /// errors are the connection's.
    func execute<Answer>(
        _ method: HTTPMethod, _ url: URL, headers: [(String, String)], body: [UInt8]?, deadline: NIODeadline, replayable: Bool,
        _ consume: (MCPHTTPResponse, URL) async throws -> Answer
    ) async throws(MCPHTTPFailure) -> Answer {
        var current = url
        for _ in 0...Self.maxRedirects {
            let here = current
            let hop: MCPHTTPHop<Answer> = try await send(method, here, headers: headers, body: body, deadline: deadline, replayable: replayable) { response in
                if [301, 302, 303, 307, 308].contains(response.status.code), let location = response.headers.first(name: "location") {
                    return .redirect(location)
                }
                return .answer(try await consume(response, here))
            }
            switch hop {
            case .answer(let answer):
                return answer
            case .redirect(let location):
                guard let next = URL(string: location, relativeTo: here)?.absoluteURL, let target = MCPHTTPOrigin(next) else {
                    throw .refused("refusing redirect from \(here.absoluteString) to \(location): not a URL")
                }
                guard target == origin else {
                    throw .refused("refusing redirect from \(here.absoluteString) to \(next.absoluteString): another origin")
                }
                current = next
            }
        }
        throw .refused("\(method) \(url.absoluteString): stopped after \(Self.maxRedirects) redirects")
    }

    /// Closes the connections kept for the next request (the session is over).
    func closeIdleConnections() {
        if case .success(let client) = client { client.closeIdleConnections() }
    }

    /// One request without redirects: sent again once, on a new connection, when its
    /// connection closed before any answer and the server may read the message twice
    /// (`replayable`).
    private func send<Answer>(
        _ method: HTTPMethod, _ url: URL, headers: [(String, String)], body: [UInt8]?, deadline: NIODeadline, replayable: Bool,
        _ consume: (MCPHTTPResponse) async throws -> Answer
    ) async throws(MCPHTTPFailure) -> Answer {
        let client: CheckedHTTPClient
        switch self.client {
        case .success(let chosen): client = chosen
        case .failure(let error): throw .connection("\(method) \(url.absoluteString): \(error)")
        }
        let given = Set(headers.map { $0.0.lowercased() })
        let all = staticHeaders.filter { !given.contains($0.0.lowercased()) } + headers
        guard let request = CheckedHTTPClient.Request(method: method, url: url.absoluteString, headers: all, body: body) else {
            throw .refused("\(method) \(url.absoluteString): not an http or https URL with a port in 1...65535")
        }
        var retried = false
        while true {
            var answered = false
            do {
                return try await client.execute(request, deadline: deadline, scope: .head, fresh: retried) { head, body in
                    answered = true
                    MCPHTTPMetrics.answered(reused: head.reusedConnection)
                    return try await consume(MCPHTTPResponse(status: head.status, headers: head.headers, body: body))
                }
            } catch let failure as MCPHTTPFailure {
                throw failure
            } catch {
                if Task.isCancelled || error is CancellationError { throw .cancelled }
                guard !retried, !answered, replayable, Self.closedBeforeAnswer(error) else {
                    throw .connection("\(method) \(url.absoluteString): \(Self.describe(error))")
                }
                retried = true
                MCPHTTPMetrics.retried()
            }
        }
    }

    /// `HTTP <code>: <the first bytes of the body>`, for an answer that is an error; also
    /// how an answer whose body is not wanted is drained. The body is read until `deadline`
    /// at most (the request's own deadline ends with the head): a server that sends a
    /// head and then stalls gets its connection closed then, and the text has what came.
    /// `.distantFuture` reads it unbounded (a request given up cancels its exchange).
    static func statusText(_ response: MCPHTTPResponse, deadline: NIODeadline) async -> String {
        let bytes = await firstBytes(of: response, deadline: deadline)
        let text = String(decoding: bytes, as: UTF8.self).trimmingWhitespace()
        return text.isEmpty ? "HTTP \(response.status.code)" : "HTTP \(response.status.code): \(text)"
    }

    /// The body's first ``errorBodyBytes``, read until `deadline`: then the read is
    /// cancelled (the body's next read throws and the client closes the connection) and
    /// what came is returned.
    private static func firstBytes(of response: MCPHTTPResponse, deadline: NIODeadline) async -> [UInt8] {
        guard deadline != .distantFuture else { return await firstBytes(of: response) }
        return await withTaskGroup(of: [UInt8]?.self) { group in
            group.addTask { await MCPHTTPConnection.firstBytes(of: response) }
            group.addTask {
                try? await Task.sleep(for: .nanoseconds(max(0, (deadline - NIODeadline.now()).nanoseconds)))
                return nil
            }
            // The first to end cancels the other; a cancelled read returns what it read.
            var bytes: [UInt8] = []
            while let next = await group.next() {
                group.cancelAll()
                if let next { bytes = next }
            }
            return bytes
        }
    }

    /// The body's first ``errorBodyBytes`` (what came, when it fails or is cancelled).
    private static func firstBytes(of response: MCPHTTPResponse) async -> [UInt8] {
        var bytes: [UInt8] = []
        do {
            for try await chunk in response.body {
                bytes.append(contentsOf: chunk.readableBytesView.prefix(errorBodyBytes - bytes.count))
                if bytes.count >= errorBodyBytes { break }
            }
        } catch {}
        return bytes
    }

    /// The whole body of an answer that holds one JSON message: at most
    /// ``MCPLimits/maxMessageBytes``, never buffering more, its buffer charged to the budget
    /// and read at the server's rate.
    static func readMessage(_ response: MCPHTTPResponse, inbound: MCPHTTPInbound) async throws(MCPHTTPFailure) -> [UInt8] {
        let limit = MCPLimits.maxMessageBytes
        if let length = response.headers.first(name: "content-length").flatMap(Int.init), length > limit {
            throw .refused("the server sent a message longer than \(limit) bytes")
        }
        var bytes: [UInt8] = []
        var charge = MCPMemoryCharge(inbound.budget)
        defer { charge.release() }
        do {
            for try await chunk in response.body {
                guard bytes.count + chunk.readableBytes <= limit else {
                    throw MCPHTTPFailure.refused("the server sent a message longer than \(limit) bytes")
                }
                let needed = bytes.count + chunk.readableBytes
                if needed > bytes.capacity {
                    let capacity = max(needed, 2 * bytes.capacity)
                    guard charge.update(capacity) else {
                        MCPFlowMetrics.refused()
                        throw MCPHTTPFailure.refused(inbound.budget.refusal("a message", bytes: needed))
                    }
                    bytes.reserveCapacity(capacity)
                }
                bytes.append(contentsOf: chunk.readableBytesView)
                await inbound.pace(chunk.readableBytes)
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
    /// fails, as does a stream past `limit` bytes in all (comments included). The decoder's
    /// buffers are charged to the budget, and the stream is read at the server's rate.
    static func readEvents(
        _ response: MCPHTTPResponse, inbound: MCPHTTPInbound, limit: Int? = nil, _ event: (SSEEvent) -> Bool
    ) async throws(MCPHTTPFailure) -> Bool {
        var decoder = SSEDecoder()
        var going = true
        var total = 0
        var charge = MCPMemoryCharge(inbound.budget)
        defer { charge.release() }
        do {
            for try await chunk in response.body {
                total += chunk.readableBytes
                if let limit, total > limit {
                    throw MCPHTTPFailure.refused("the server sent more than \(limit) bytes in answer to one request")
                }
                try chunk.withUnsafeReadableBytes { raw throws(SSEDecoder.EventTooLong) in
                    try decoder.feed(raw) { if going { going = event($0) } }
                }
                if !going { return false }
                guard charge.update(decoder.bufferedCapacity) else {
                    MCPFlowMetrics.refused()
                    throw MCPHTTPFailure.refused(inbound.budget.refusal("an event", bytes: decoder.bufferedBytes))
                }
                await inbound.pace(chunk.readableBytes)
            }
        } catch let failure as MCPHTTPFailure {
            throw failure
        } catch let tooLong as SSEDecoder.EventTooLong {
            throw .refused("the server sent a \(tooLong.description)")
        } catch {
            if Task.isCancelled || error is CancellationError { throw .cancelled }
            throw .connection("reading the event stream: \(describe(error))")
        }
        return true
    }

    /// The media type of an answer, lower-cased, without parameters.
    static func mediaType(_ response: MCPHTTPResponse) -> String {
        let value = response.headers.first(name: "content-type") ?? ""
        return String(value.prefix { $0 != ";" }).trimmingWhitespace().lowercased()
    }

    /// Requests a server may get twice without harm: `initialize` (a second session the
    /// server expires at worst) and the ones that only read. A `tools/call` is not: a tool may
    /// act, so it is never sent again.
    static let repeatableMethods: Set<String> = ["initialize", "ping", "tools/list"]

    /// Whether `message` may reach the server twice: a notification (`initialized`,
    /// `cancelled`: the second changes nothing), a response (the server ignores an id it no
    /// longer waits for), or a request in ``repeatableMethods``.
    static func mayRepeat(_ message: JSONRPCMessage) -> Bool {
        if case .request(_, let method, _) = message { return repeatableMethods.contains(method) }
        return true
    }

    /// Whether `error` says the connection closed before the answer's first byte (the
    /// server closed it as the request went out, or reset it).
    static func closedBeforeAnswer(_ error: any Error) -> Bool {
        if let error = error as? CheckedHTTPError { return error == .incompleteAnswer }
        if let error = error as? ChannelError { return error == .ioOnClosedChannel || error == .eof || error == .outputClosed }
        if let error = error as? IOError { return [ECONNRESET, EPIPE].contains(error.errnoCode) }
        return false
    }

    /// An error of the HTTP client in a few words.
    static func describe(_ error: any Error) -> String {
        if let error = error as? CheckedHTTPError {
            switch error {
            case .timedOut: return "timed out"
            case .setupTimedOut: return "connect timed out"
            case .incompleteAnswer: return "the server closed the connection"
            case .unexpectedAnswer: return error.description
            }
        }
        if case ChannelError.connectTimeout = error { return "connect timed out" }
        if let error = error as? NIOConnectionError, let first = error.connectionErrors.first {
            return describe(first.error)
        }
        if let error = error as? IOError { return SystemCallError.message(error.errnoCode) }
        return "\(error)"
    }

    private static func isToken(_ name: String) -> Bool {
        !name.isEmpty
            && name.utf8.allSatisfy { byte in
                (0x30...0x39).contains(byte) || (0x41...0x5a).contains(byte) || (0x61...0x7a).contains(byte)
                    || "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
    }
}

/// What one request of ``MCPHTTPConnection/execute(_:_:headers:body:deadline:replayable:_:)``
/// gave: the answer, or a redirect's `Location`.
private enum MCPHTTPHop<Answer> {
    case answer(Answer)
    case redirect(String)
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
