import AgentCore
import FoundationEssentials
import NIOCore
import NIOHTTP1
import Synchronization

/// MCP's Streamable HTTP transport (protocol 2025-03-26 and later): every message is a POST
/// to the server's URL, answered with one JSON message, an event stream that carries the
/// request's answer (and whatever the server sends before it), or 202 for a notification or
/// a response. The `Mcp-Session-Id` the server gives with the `initialize` answer goes on
/// every later request, with `MCP-Protocol-Version`; a 404 to a request that carried a
/// session id means the session expired, which ends it. Once initialized, a GET stream
/// listens for the server's own messages (`tools/list_changed`); a 405 means the server
/// offers none. Closing sends DELETE with the session id (best effort, bounded).
final class MCPStreamableHTTPTransport: MCPTransport {
    /// The longest `Mcp-Session-Id` accepted.
    static let maxSessionIDBytes = 1024
    /// The DELETE that ends a session on close waits at most this long, its answer's body
    /// included.
    static let goodbyeTimeout: Duration = .seconds(5)
    /// The GET stream is reopened at most once per this interval when the server ends it.
    static let listenRetryInterval: Duration = .seconds(1)

    private struct State {
        var sessionID: String?
        var protocolVersion: String?
        var listening = false
    }
    private let state = Mutex(State())
    private let exchanges: MCPHTTPExchanges
    private let url: URL
    private let connectTimeout: Duration

    var serverName: String { exchanges.serverName }

    /// A transport for `url` (an `http` or `https` URL, or the error says why not).
    init(
        serverName: String, url text: String, headers: [String: String], connectTimeout: Duration, budget: MCPMemoryBudget,
        log: @escaping @Sendable (_ server: String, _ line: String) -> Void, events: @escaping @Sendable (MCPTransportEvent) -> Void
    ) throws(MCPError) {
        guard let url = URL(string: text), let origin = MCPHTTPOrigin(url) else {
            throw MCPError(.start, "server \(goQuote(serverName)): \(goQuote(text)) is not an http or https URL")
        }
        self.url = url
        self.connectTimeout = connectTimeout
        let connection = MCPHTTPConnection(serverName: serverName, origin: origin, headers: headers, connectTimeout: connectTimeout)
        exchanges = MCPHTTPExchanges(connection: connection, budget: budget, events: events, log: log)
    }

    func send(_ message: JSONRPCMessage) throws(MCPError) {
        let body = Array(message.encodedLine().dropLast())
        let request: JSONRPCID? = if case .request(let id, _, _) = message { id } else { nil }
        let method: String? = if case .notification(let method, _) = message { method } else { nil }
        let replayable = MCPHTTPConnection.mayRepeat(message)
        try exchanges.start(request: request) { [self] in
            await post(body, request: request, notification: method, replayable: replayable)
        }
    }

    func abandon(_ id: JSONRPCID) { exchanges.abandon(id) }

    func negotiated(protocolVersion version: String) {
        state.withLock { $0.protocolVersion = version }
    }

    func requestClose() {
        Task { await close() }
    }

    func close() async {
        await exchanges.close { [self] in
            guard let sessionID = state.withLock({ $0.sessionID }) else { return }
            let headers = [("Mcp-Session-Id", sessionID)] + versionHeader
            let deadline = NIODeadline.now() + TimeAmount(Self.goodbyeTimeout)
            _ = try? await exchanges.connection.execute(.DELETE, url, headers: headers, body: nil, deadline: deadline, replayable: true) {
                response, _ in await MCPHTTPConnection.statusText(response, deadline: deadline)
            }
        }
    }

    private var versionHeader: [(String, String)] {
        state.withLock { $0.protocolVersion }.map { [("MCP-Protocol-Version", $0)] } ?? []
    }

    /// One POST and its answer.
    private func post(_ body: [UInt8], request: JSONRPCID?, notification: String?, replayable: Bool) async {
        let sessionID = state.withLock { $0.sessionID }
        var headers = [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")] + versionHeader
        if let sessionID { headers.append(("Mcp-Session-Id", sessionID)) }
        // A request's wait is the session's timeout (which abandons it); a notification or a
        // response gets the connect timeout, for the answer's head and body together (the
        // body of an answer no one waits for would otherwise hold an exchange for good).
        let deadline: NIODeadline = request == nil ? .now() + TimeAmount(connectTimeout) : .distantFuture
        do throws(MCPHTTPFailure) {
            try await exchanges.connection.execute(.POST, url, headers: headers, body: body, deadline: deadline, replayable: replayable) {
                response, _ in
                try await answered(response, request: request, sessionID: sessionID, notification: notification, deadline: deadline)
            }
        } catch {
            fail(error, request: request, what: notification ?? "a response")
        }
    }

    /// A POST's answer: the session id, then the request's answer (a JSON message, or the
    /// event stream that carries it), or the end of a notification's or response's.
    private func answered(
        _ response: MCPHTTPResponse, request: JSONRPCID?, sessionID: String?, notification: String?, deadline: NIODeadline
    ) async throws(MCPHTTPFailure) {
        try takeSessionID(response)
        let status = response.status.code
        if status == 404, sessionID != nil {
            exchanges.end("server \(goQuote(serverName)): the session expired (HTTP 404)")
            return
        }
        guard (200..<300).contains(status) else {
            throw .refused(await MCPHTTPConnection.statusText(response, deadline: deadline))
        }
        guard let request else {
            _ = await MCPHTTPConnection.statusText(response, deadline: deadline)
            if notification == "notifications/initialized" { startListening() }
            return
        }
        switch MCPHTTPConnection.mediaType(response) {
        case "application/json":
            let message = exchanges.deliver(try await MCPHTTPConnection.readMessage(response, inbound: exchanges.inbound))
            if !Self.answers(message, request) { throw .refused("the server's answer is not a response to the request") }
        case "text/event-stream":
            let ended = try await MCPHTTPConnection.readEvents(response, inbound: exchanges.inbound, limit: MCPLimits.maxExchangeBytes) { event in
                guard !event.data.isEmpty else { return true }
                return !Self.answers(exchanges.deliver(event.data), request)
            }
            if ended { throw .refused("the server ended its event stream without answering") }
        case let other:
            throw .refused("the server answered with Content-Type \(goQuote(other)) (HTTP \(status))")
        }
    }

    private func fail(_ failure: MCPHTTPFailure, request: JSONRPCID?, what: String) {
        switch failure {
        case .cancelled:
            break
        case .connection(let text):
            if !exchanges.isOver { exchanges.end("server \(goQuote(serverName)): \(text)") }
        case .refused(let text):
            if let request {
                exchanges.events(.requestFailed(request, MCPError(.invalidResponse, text)))
            } else {
                exchanges.log(serverName, "sending \(what): \(text)")
            }
        }
    }

    private static func answers(_ message: JSONRPCMessage?, _ id: JSONRPCID) -> Bool {
        switch message {
        case .result(let answered, _)?: answered == id
        case .error(let answered, _)?: answered == id
        default: false
        }
    }

    /// Keeps the first `Mcp-Session-Id` the server gives (visible ASCII, bounded).
    private func takeSessionID(_ response: MCPHTTPResponse) throws(MCPHTTPFailure) {
        guard let value = response.headers.first(name: "mcp-session-id") else { return }
        guard !value.isEmpty, value.utf8.count <= Self.maxSessionIDBytes, value.utf8.allSatisfy({ (0x21...0x7e).contains($0) }) else {
            throw .refused("the server's Mcp-Session-Id is not visible ASCII of at most \(Self.maxSessionIDBytes) bytes")
        }
        state.withLock { s in
            if s.sessionID == nil { s.sessionID = value }
        }
    }

    /// Opens the GET stream once the session is initialized (at most once).
    private func startListening() {
        let first = state.withLock { s -> Bool in
            defer { s.listening = true }
            return !s.listening
        }
        guard first else { return }
        try? exchanges.start(request: nil) { [self] in await listen() }
    }

    /// The GET stream: the server's requests and notifications outside any request; reopened
    /// when the server ends it, at most once per ``listenRetryInterval``.
    private func listen() async {
        while !Task.isCancelled, !exchanges.isOver {
            let opened = ContinuousClock.now
            var headers = [("Accept", "text/event-stream")] + versionHeader
            if let sessionID = state.withLock({ $0.sessionID }) { headers.append(("Mcp-Session-Id", sessionID)) }
            do throws(MCPHTTPFailure) {
                let deadline = NIODeadline.now() + TimeAmount(connectTimeout)
                let over = try await exchanges.connection.execute(.GET, url, headers: headers, body: nil, deadline: deadline, replayable: true) {
                    response, _ in
                    let status = response.status.code
                    if status == 405 {
                        _ = await MCPHTTPConnection.statusText(response, deadline: deadline)
                        return true
                    }
                    guard (200..<300).contains(status), MCPHTTPConnection.mediaType(response) == "text/event-stream" else {
                        exchanges.log(serverName, "listening stream: \(await MCPHTTPConnection.statusText(response, deadline: deadline))")
                        return true
                    }
                    _ = try await MCPHTTPConnection.readEvents(response, inbound: exchanges.inbound) { event in
                        if !event.data.isEmpty { exchanges.deliver(event.data) }
                        return true
                    }
                    return false
                }
                if over { return }
            } catch {
                switch error {
                case .cancelled: return
                case .refused(let text): exchanges.log(serverName, "listening stream: \(text)")
                case .connection: break
                }
            }
            try? await Task.sleep(until: opened + Self.listenRetryInterval)
        }
    }
}
