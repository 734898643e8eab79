import AgentCore
import FoundationEssentials
import NIOCore
import NIOHTTP1
import Synchronization

/// MCP's HTTP+SSE transport (protocol 2024-11-05): a GET of the server's URL opens an event
/// stream whose first `endpoint` event names the URL to POST messages to (resolved against
/// the stream's URL, and refused unless on the same origin); the answers come back as
/// `message` events on the stream, and the POSTs' own answers (202) are ignored. The stream
/// ending ends the session.
final class MCPLegacySSETransport: MCPTransport {
    private struct State {
        var endpoint: URL?
        var waiter: CheckedContinuation<Result<URL, MCPError>, Never>?
        var failure: MCPError?
    }
    private let state = Mutex(State())
    private let exchanges: MCPHTTPExchanges
    private let url: URL
    /// A POST's answer (202, its body ignored) is awaited this long, the connect timeout,
    /// its body included (the request's own answer comes on the stream, so nothing else
    /// would end an exchange whose body stalls).
    private let postTimeout: Duration

    var serverName: String { exchanges.serverName }

    private init(exchanges: MCPHTTPExchanges, url: URL, postTimeout: Duration) {
        self.exchanges = exchanges
        self.url = url
        self.postTimeout = postTimeout
    }

    /// Opens the stream and waits (within `connectTimeout`) for the `endpoint` event; on
    /// failure everything is closed again.
    static func connect(
        serverName: String, url text: String, headers: [String: String], connectTimeout: Duration, budget: MCPMemoryBudget,
        log: @escaping @Sendable (_ server: String, _ line: String) -> Void, events: @escaping @Sendable (MCPTransportEvent) -> Void
    ) async throws(MCPError) -> MCPLegacySSETransport {
        guard let url = URL(string: text), let origin = MCPHTTPOrigin(url) else {
            throw MCPError(.start, "server \(goQuote(serverName)): \(goQuote(text)) is not an http or https URL")
        }
        let connection = MCPHTTPConnection(serverName: serverName, origin: origin, headers: headers, connectTimeout: connectTimeout)
        let transport = MCPLegacySSETransport(exchanges: MCPHTTPExchanges(connection: connection, budget: budget, events: events, log: log), url: url, postTimeout: connectTimeout)
        do throws(MCPError) {
            try transport.exchanges.start(request: nil) { await transport.stream(connectTimeout: connectTimeout) }
            _ = try await transport.endpoint(within: connectTimeout)
        } catch {
            await transport.close()
            throw error
        }
        return transport
    }

    func send(_ message: JSONRPCMessage) throws(MCPError) {
        guard let endpoint = state.withLock({ $0.endpoint }) else {
            throw MCPError(.unavailable, "server \(goQuote(serverName)) has not named its endpoint")
        }
        let body = Array(message.encodedLine().dropLast())
        let request: JSONRPCID? = if case .request(let id, _, _) = message { id } else { nil }
        let replayable = MCPHTTPConnection.mayRepeat(message)
        try exchanges.start(request: request) { [self] in
            do throws(MCPHTTPFailure) {
                let deadline = NIODeadline.now() + TimeAmount(postTimeout)
                try await exchanges.connection.execute(
                    .POST, endpoint, headers: [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")],
                    body: body, deadline: deadline, replayable: replayable
                ) { response, _ in
                    let text = await MCPHTTPConnection.statusText(response, deadline: deadline)
                    guard (200..<300).contains(response.status.code) else { throw MCPHTTPFailure.refused(text) }
                }
            } catch {
                switch error {
                case .cancelled: break
                case .connection(let text): exchanges.end("server \(goQuote(serverName)): \(text)")
                case .refused(let text):
                    if let request {
                        exchanges.events(.requestFailed(request, MCPError(.invalidResponse, text)))
                    } else {
                        exchanges.log(serverName, "sending a message: \(text)")
                    }
                }
            }
        }
    }

    func requestClose() {
        Task { await close() }
    }

    func close() async {
        await exchanges.close {}
        settle(.failure(MCPError(.closed, "server \(goQuote(serverName)) was closed")))
    }

    /// Waits for the endpoint, the stream's failure, or the timeout (with a second of slack,
    /// so that a connection that fails at the connect deadline is reported as what it is).
    private func endpoint(within timeout: Duration) async throws(MCPError) -> URL {
        let timer = Task { [weak self] in
            guard (try? await Task.sleep(for: timeout + .seconds(1))) != nil, let self else { return }
            self.settle(.failure(MCPError(.timeout, "initialize: no endpoint event within \(timeout)")))
        }
        defer { timer.cancel() }
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<URL, MCPError>, Never>) in
            let now = state.withLock { s -> Result<URL, MCPError>? in
                if let endpoint = s.endpoint { return .success(endpoint) }
                if let failure = s.failure { return .failure(failure) }
                s.waiter = continuation
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
        return try result.get()
    }

    /// Settles the wait for the endpoint (the first outcome wins).
    private func settle(_ result: Result<URL, MCPError>) {
        let waiter = state.withLock { s -> CheckedContinuation<Result<URL, MCPError>, Never>? in
            guard s.endpoint == nil, s.failure == nil else { return nil }
            switch result {
            case .success(let url): s.endpoint = url
            case .failure(let error): s.failure = error
            }
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: result)
    }

    /// The GET stream, for the session's whole life.
    private func stream(connectTimeout: Duration) async {
        var reason = "server \(goQuote(serverName)) ended its event stream"
        do throws(MCPHTTPFailure) {
            let deadline = NIODeadline.now() + TimeAmount(connectTimeout)
            try await exchanges.connection.execute(.GET, url, headers: [("Accept", "text/event-stream")], body: nil, deadline: deadline, replayable: true) {
                response, streamURL in
                guard (200..<300).contains(response.status.code), MCPHTTPConnection.mediaType(response) == "text/event-stream" else {
                    throw MCPHTTPFailure.refused(await MCPHTTPConnection.statusText(response, deadline: deadline))
                }
                _ = try await MCPHTTPConnection.readEvents(response, inbound: exchanges.inbound) { event in
                    switch event.type {
                    case "endpoint": return named(String(decoding: event.data, as: UTF8.self), relativeTo: streamURL)
                    case "message": if !event.data.isEmpty { exchanges.deliver(event.data) }
                    default: break
                    }
                    return true
                }
            }
        } catch {
            switch error {
            case .cancelled: return
            case .connection(let text): reason = "server \(goQuote(serverName)): \(text)"
            case .refused(let text):
                settle(.failure(MCPError(.invalidResponse, "initialize: \(text)")))
                reason = "server \(goQuote(serverName)): \(text)"
            }
        }
        settle(.failure(MCPError(.closed, "initialize: \(reason)")))
        exchanges.end(reason)
    }

    /// Takes the first `endpoint` event; false (stop reading) when it is not on the stream's
    /// origin.
    private func named(_ text: String, relativeTo base: URL) -> Bool {
        guard state.withLock({ $0.endpoint == nil }) else { return true }
        guard let endpoint = URL(string: text, relativeTo: base)?.absoluteURL, let origin = MCPHTTPOrigin(endpoint) else {
            settle(.failure(MCPError(.invalidResponse, "initialize: the server's endpoint \(goQuote(text)) is not a URL")))
            return false
        }
        guard origin == exchanges.connection.origin else {
            settle(.failure(MCPError(.invalidResponse, "initialize: refusing endpoint \(endpoint.absoluteString): not on \(exchanges.connection.origin)")))
            return false
        }
        settle(.success(endpoint))
        return true
    }
}
