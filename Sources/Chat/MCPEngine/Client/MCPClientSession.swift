import AgentCore
import Synchronization

/// What a session tells its owner between calls.
public enum MCPSessionEvent: Sendable, Equatable {
    /// The server sent `notifications/tools/list_changed`: list again.
    case toolsChanged
    /// The session is over (why); the last event.
    case ended(String)
}

/// An MCP client session with one server over any ``MCPTransport`` (stdio, Streamable HTTP,
/// HTTP+SSE): `initialize` with version negotiation,
/// `notifications/initialized`, `tools/list` with paging, `tools/call` with a timeout and
/// cancellation, and the server's notifications as ``events``.
///
/// Requests are matched to answers by id in a table under a lock; the transport delivers
/// answers, and each waiting request ends at its answer, its timeout, its task's
/// cancellation (which sends `notifications/cancelled`), or the end of the session (which
/// fails every request in flight with why it ended).
///
/// Memory: one entry per request in flight (calls at most ``MCPLimits/maxConcurrentCalls``),
/// ``MCPLimits/maxBufferedEvents`` events, and the transport's bounds.
public final class MCPClientSession: Sendable {
    /// How long each step may take.
    public struct Timeouts: Sendable {
        public var connect: Duration
        public var list: Duration
        public var call: Duration
        public init(connect: Duration = .seconds(30), list: Duration = .seconds(30), call: Duration = .seconds(60)) {
            self.connect = connect
            self.list = list
            self.call = call
        }
    }

    /// The name the client gives in `initialize`.
    public static let clientName = "coder-agent"
    /// The versions spoken, newest first; the first is offered.
    public static let protocolVersions = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
    /// Invalid stdout lines logged per session (all are counted).
    static let invalidLinesLogged = 10

    private struct Pending {
        var method: String
        var sent: Bool
        var continuation: CheckedContinuation<Result<JSONValue, MCPError>, Never>
        var timer: Task<Void, Never>?
    }

    private struct State {
        var nextID: Int64 = 1
        var pending: [Int64: Pending] = [:]
        var callsInFlight = 0
        var ended: String?
        var invalidLines = 0
        var lastInvalid: String?
        /// The id of `initialize` while it waits: output that is not JSON-RPC fails it at once.
        var initializeID: Int64?
    }

    private let state = Mutex(State())
    private let transport: any MCPTransport
    private let eventContinuation: AsyncStream<MCPSessionEvent>.Continuation
    private let log: @Sendable (_ server: String, _ line: String) -> Void
    public let timeouts: Timeouts
    /// The server's `tools/list_changed` and the session's end, newest kept.
    public let events: AsyncStream<MCPSessionEvent>
    private let handshake = Mutex<(version: String, serverName: String, serverVersion: String)>(("", "", ""))

    /// The protocol version the server agreed to.
    public var protocolVersion: String { handshake.withLock { $0.version } }
    /// The most of `serverInfo`'s name and version kept, each.
    static let maxServerInfoCharacters = 256

    /// The server's `serverInfo` name and version (at most ``maxServerInfoCharacters`` each).
    public var serverInfo: (name: String, version: String) { handshake.withLock { ($0.serverName, $0.serverVersion) } }
    public let serverName: String
    /// `tools/call` requests waiting for their answer.
    public var callsInFlight: Int { state.withLock { $0.callsInFlight } }
    /// The server's pid (and process group) for a stdio server; 0 for an HTTP one.
    public var pid: Int32 { (transport as? MCPStdioProcess)?.pid ?? 0 }
    /// `stdio`, `http` or `sse` (``MCPEndpoint/transportName``).
    public let transportName: String

    /// A session over the transport `start` makes with the callback it is given.
    private init(
        serverName: String, transportName: String, timeouts: Timeouts, log: @escaping @Sendable (_ server: String, _ line: String) -> Void,
        start: (_ events: @escaping @Sendable (MCPTransportEvent) -> Void) async throws(MCPError) -> any MCPTransport
    ) async throws(MCPError) {
        self.serverName = serverName
        self.transportName = transportName
        self.timeouts = timeouts
        self.log = log
        (events, eventContinuation) = AsyncStream.makeStream(of: MCPSessionEvent.self, bufferingPolicy: .bufferingNewest(MCPLimits.maxBufferedEvents))
        // The transport calls back into the session; the session is not retained by it
        // beyond the transport's life, and `box` breaks the initialisation order.
        let box = SessionBox()
        transport = try await start { event in
            box.session?.handle(event)
        }
        box.set(self)
    }

    /// A session dropped without ``close()`` still shuts its server down.
    deinit { transport.requestClose() }

    /// Starts `command` and initializes the session; on failure the server is shut down.
    /// `log` gets the server's stderr lines and the session's complaints about its output,
    /// with the server's name.
    public static func connect(
        _ command: MCPStdioCommand, clientVersion: String, timeouts: Timeouts = Timeouts(), timing: MCPStdioProcess.Timing = .init(),
        owner: MCPStdioOwner? = nil, budget: MCPMemoryBudget = MCPMemoryBudget(),
        log: @escaping @Sendable (_ server: String, _ line: String) -> Void
    ) async throws(MCPError) -> MCPClientSession {
        let name = command.serverName
        let session = try await MCPClientSession(
            serverName: name, transportName: MCPEndpoint.stdio(command).transportName, timeouts: timeouts, log: log
        ) { events throws(MCPError) in
            try MCPStdioProcess.start(command, timing: timing, owner: owner, budget: budget, stderrLine: { log(name, $0) }, events: events)
        }
        try await session.initialize(clientVersion: clientVersion, timeout: timeouts.connect)
        return session
    }

    /// Connects to a Streamable HTTP server (`legacySSE` false) or a legacy HTTP+SSE server
    /// (its event stream and endpoint first) at `url` and initializes the session, all within
    /// the session's connect timeout.
    static func connectRemote(
        url: String, headers: [String: String], legacySSE: Bool, serverName: String, clientVersion: String, timeouts: Timeouts,
        budget: MCPMemoryBudget, log: @escaping @Sendable (_ server: String, _ line: String) -> Void
    ) async throws(MCPError) -> MCPClientSession {
        let started = ContinuousClock.now
        let endpoint: MCPEndpoint = legacySSE ? .sse(url: url, headers: headers) : .streamableHTTP(url: url, headers: headers)
        let session = try await MCPClientSession(
            serverName: serverName, transportName: endpoint.transportName, timeouts: timeouts, log: log
        ) { events throws(MCPError) -> any MCPTransport in
            if legacySSE {
                return try await MCPLegacySSETransport.connect(
                    serverName: serverName, url: url, headers: headers, connectTimeout: timeouts.connect, budget: budget, log: log, events: events)
            }
            return try MCPStreamableHTTPTransport(
                serverName: serverName, url: url, headers: headers, connectTimeout: timeouts.connect, budget: budget, log: log, events: events)
        }
        let remaining = timeouts.connect - (ContinuousClock.now - started)
        try await session.initialize(
            clientVersion: clientVersion, timeout: max(remaining, .milliseconds(1)), timeoutText: "initialize: timed out after \(timeouts.connect)")
        return session
    }

    /// Runs `initialize`; on failure the transport is closed.
    private func initialize(clientVersion: String, timeout: Duration, timeoutText: String? = nil) async throws(MCPError) {
        do {
            try await handshake(clientVersion: clientVersion, timeout: timeout, timeoutText: timeoutText)
        } catch {
            await close()
            throw error
        }
    }

    private func handshake(clientVersion: String, timeout: Duration, timeoutText: String?) async throws(MCPError) {
        let params: JSONValue = .object([
            ("protocolVersion", .string(Self.protocolVersions[0])),
            ("capabilities", .object([])),
            ("clientInfo", .object([("name", .string(Self.clientName)), ("version", .string(clientVersion))])),
        ])
        let result = try await request("initialize", params, timeout: timeout, timeoutText: timeoutText, isInitialize: true)
        guard let version = result["protocolVersion"]?.stringValue else {
            throw MCPError(.invalidResponse, "initialize: the answer has no protocolVersion")
        }
        guard Self.protocolVersions.contains(version) else {
            throw MCPError(.invalidResponse, "initialize: server speaks protocol version \(goQuote(version)); this client speaks \(Self.protocolVersions.joined(separator: ", "))")
        }
        // Kept for the session's life outside the message budget: cut to a name's length (a
        // server may send megabytes).
        let name = String((result["serverInfo"]?["name"]?.stringValue ?? "").prefix(Self.maxServerInfoCharacters))
        let serverVersion = String((result["serverInfo"]?["version"]?.stringValue ?? "").prefix(Self.maxServerInfoCharacters))
        handshake.withLock { $0 = (version, name, serverVersion) }
        transport.negotiated(protocolVersion: version)
        try transport.send(JSONRPCMessage.notification(method: "notifications/initialized", params: nil))
    }

    /// Every tool, following `nextCursor` (at most ``MCPLimits/maxListPages`` pages and
    /// ``MCPLimits/maxTools`` tools), all within the list timeout; schemas reduced and
    /// descriptions cut by a fresh ``MCPToolBudget``, some tools left out.
    public func listTools() async throws(MCPError) -> [MCPTool] {
        var budget = MCPToolBudget()
        return try await listTools(budget: &budget)
    }

    /// The listing, each tool admitted by `budget` as its page is read, so that no page's
    /// descriptions or schemas are held beyond it; what it cut is in `budget`.
    func listTools(budget: inout MCPToolBudget) async throws(MCPError) -> [MCPTool] {
        let deadline = ContinuousClock.now + timeouts.list
        var tools: [MCPTool] = []
        var listed = 0
        var cursor: String?
        var seen: Set<String> = []
        for _ in 0..<MCPLimits.maxListPages {
            let params: JSONValue? = cursor.map { .object([("cursor", .string($0))]) }
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { throw MCPError(.timeout, "tools/list: timed out after \(timeouts.list)") }
            let page = try await request("tools/list", params, timeout: remaining, timeoutText: "tools/list: timed out after \(timeouts.list)")
            guard let items = page["tools"]?.arrayValue else { throw MCPError(.invalidResponse, "tools/list: the answer has no tools array") }
            for item in items {
                guard let name = item["name"]?.stringValue, !name.isEmpty else {
                    throw MCPError(.invalidResponse, "tools/list: a tool without a name")
                }
                guard listed < MCPLimits.maxTools else {
                    throw MCPError(.invalidResponse, "tools/list: more than \(MCPLimits.maxTools) tools")
                }
                listed += 1
                if let tool = budget.admit(name: name, description: item["description"]?.stringValue ?? "", schema: item["inputSchema"]) {
                    tools.append(tool)
                }
            }
            guard let next = page["nextCursor"]?.stringValue, !next.isEmpty else { return tools }
            guard seen.insert(next).inserted else { throw MCPError(.invalidResponse, "tools/list: the server repeated cursor \(goQuote(next))") }
            cursor = next
        }
        throw MCPError(.invalidResponse, "tools/list: more than \(MCPLimits.maxListPages) pages")
    }

    /// Calls a tool. `arguments` is an object or nil. Cancelling the calling task cancels the
    /// call on the server (`notifications/cancelled`), as does the timeout.
    public func callTool(_ name: String, arguments: JSONValue?, timeout: Duration? = nil) async throws(MCPError) -> MCPToolResult {
        let admitted = state.withLock { s -> Bool in
            guard s.callsInFlight < MCPLimits.maxConcurrentCalls else { return false }
            s.callsInFlight += 1
            return true
        }
        guard admitted else {
            throw MCPError(.unavailable, "server \(goQuote(serverName)) has \(MCPLimits.maxConcurrentCalls) calls in flight")
        }
        defer { state.withLock { $0.callsInFlight -= 1 } }
        var params: [(String, JSONValue)] = [("name", .string(name))]
        if let arguments { params.append(("arguments", arguments)) }
        let result = try await request("tools/call", .object(params), timeout: timeout ?? timeouts.call)
        return try MCPToolResult(mapping: result)
    }

    /// Shuts the server down (stdio: stdin closed, then SIGTERM, then SIGKILL; HTTP: the
    /// exchanges cancelled, the session deleted, the client shut down) and waits for it.
    public func close() async {
        await transport.close()
    }

    /// Sends a request and waits for its answer, the timeout, cancellation, or the end.
    func request(
        _ method: String, _ params: JSONValue?, timeout: Duration, timeoutText: String? = nil, isInitialize: Bool = false
    ) async throws(MCPError) -> JSONValue {
        let id = state.withLock { s -> Int64 in
            defer { s.nextID += 1 }
            if isInitialize { s.initializeID = s.nextID }
            return s.nextID
        }
        defer {
            if isInitialize { state.withLock { $0.initializeID = nil } }
        }
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<JSONValue, MCPError>, Never>) in
                let ended = state.withLock { s -> String? in
                    if let ended = s.ended { return ended }
                    s.pending[id] = Pending(method: method, sent: false, continuation: continuation, timer: nil)
                    return nil
                }
                if let ended {
                    continuation.resume(returning: .failure(MCPError(.closed, "\(method): \(ended)")))
                    return
                }
                if Task.isCancelled {
                    complete(id, .failure(MCPError(.cancelled, "\(method): cancelled")))
                    return
                }
                do throws(MCPError) {
                    try transport.send(JSONRPCMessage.request(id: .number(id), method: method, params: params))
                } catch {
                    complete(id, .failure(MCPError(error.kind, "\(method): \(error.message)")))
                    return
                }
                let text = timeoutText ?? "\(method): timed out after \(timeout)"
                let timer = Task { [weak self] in
                    guard (try? await Task.sleep(for: timeout)) != nil, let self else { return }
                    self.complete(id, .failure(MCPError(.timeout, self.withOutputNote(text))))
                }
                let stillPending = state.withLock { s -> Bool in
                    guard s.pending[id] != nil else { return false }
                    s.pending[id]?.sent = true
                    s.pending[id]?.timer = timer
                    return true
                }
                if !stillPending { timer.cancel() }
            }
        } onCancel: {
            complete(id, .failure(MCPError(.cancelled, "\(method): cancelled")))
        }
        return try result.get()
    }

    /// Ends request `id` with `result` if it is still waiting; a request that was sent and
    /// is given up (cancelled, timed out) is cancelled on the server.
    private func complete(_ id: Int64, _ result: Result<JSONValue, MCPError>) {
        guard let pending = state.withLock({ $0.pending.removeValue(forKey: id) }) else { return }
        pending.timer?.cancel()
        if pending.sent, case .failure(let error) = result, error.kind == .cancelled || error.kind == .timeout {
            let reason = error.kind == .cancelled ? "cancelled by the client" : "timed out"
            let note = JSONRPCMessage.notification(
                method: "notifications/cancelled", params: .object([("requestId", .number(String(id))), ("reason", .string(reason))]))
            try? transport.send(note)
            transport.abandon(.number(id))
        }
        pending.continuation.resume(returning: result)
    }

    private func withOutputNote(_ text: String) -> String {
        guard let last = state.withLock({ $0.lastInvalid }) else { return text }
        return "\(text) (the server wrote output that is not JSON-RPC: \(last))"
    }

    fileprivate func handle(_ event: MCPTransportEvent) {
        switch event {
        case .message(.result(.number(let id), let value)):
            complete(id, .success(value))
        case .message(.error(.number(let id)?, let error)):
            let method = state.withLock { $0.pending[id]?.method } ?? "request"
            complete(id, .failure(MCPError(.remote(code: error.code), "\(method): \(error.message) (JSON-RPC error \(error.code))")))
        case .message(.result), .message(.error):
            break
        case .message(.request(let id, let method, _)):
            let answer: JSONRPCMessage =
                method == "ping"
                ? .result(id: id, .object([]))
                : .error(id: id, JSONRPCError(code: JSONRPCError.methodNotFound, message: "Method not found: \(method)"))
            try? transport.send(answer)
        case .message(.notification(let method, _)):
            if method == "notifications/tools/list_changed" { eventContinuation.yield(.toolsChanged) }
        case .invalid(let reason):
            let (count, logIt, initializing) = state.withLock { s -> (Int, Bool, Int64?) in
                s.invalidLines += 1
                s.lastInvalid = reason
                return (s.invalidLines, s.invalidLines <= Self.invalidLinesLogged, s.initializeID)
            }
            if logIt { log(serverName, "\(transport is MCPStdioProcess ? "stdout line" : "message") is not JSON-RPC: \(reason)") }
            if let initializing {
                complete(initializing, .failure(MCPError(.invalidResponse, "initialize: the server wrote output that is not JSON-RPC: \(reason)")))
            }
            if count > MCPLimits.maxInvalidMessages {
                endSession("server \(goQuote(serverName)) wrote more than \(MCPLimits.maxInvalidMessages) lines that are not JSON-RPC (last: \(reason))")
                transport.requestClose()
            }
        case .requestFailed(.number(let id), let error):
            let method = state.withLock { $0.pending[id]?.method } ?? "request"
            complete(id, .failure(MCPError(error.kind, "\(method): \(error.message)")))
        case .requestFailed:
            break
        case .ended(let reason):
            endSession(reason)
        }
    }

    private func endSession(_ reason: String) {
        let pending = state.withLock { s -> [Int64: Pending] in
            if s.ended == nil { s.ended = reason }
            defer { s.pending = [:] }
            return s.pending
        }
        for (_, request) in pending {
            request.timer?.cancel()
            request.continuation.resume(returning: .failure(MCPError(.closed, "\(request.method): \(reason)")))
        }
        eventContinuation.yield(.ended(reason))
        eventContinuation.finish()
    }
}

/// The session as the process thread's callback sees it: set once, right after the process
/// started, and weak so that a dropped session is not kept alive by its server's thread.
private final class SessionBox: Sendable {
    private let value = Mutex<WeakSession>(WeakSession())
    var session: MCPClientSession? { value.withLock { $0.session } }
    func set(_ session: MCPClientSession) { value.withLock { $0.session = session } }
}

private struct WeakSession {
    weak var session: MCPClientSession?
}
