import AgentCore
import Synchronization

/// What both HTTP transports share: the exchanges in flight (one task per POST, plus the
/// stream that listens), the session's end reported once, and closing (tasks cancelled, each
/// closing its connection).
///
/// Memory: at most ``maxInFlight`` exchanges; each reads through a bounded reader.
final class MCPHTTPExchanges: Sendable {
    /// POSTs in flight for one server; a send past it fails at once (the session's own
    /// bounds keep it far below: 16 calls, a listing, notifications).
    static let maxInFlight = 64

    private struct State {
        var tasks: [Int: Task<Void, Never>] = [:]
        var requests: [JSONRPCID: Int] = [:]
        var next = 0
        var ended = false
        var closing = false
    }
    private let state = Mutex(State())
    private let closed = Latch()
    let connection: MCPHTTPConnection
    /// The server's reading rates and the budget its answers are charged to.
    let inbound: MCPHTTPInbound
    let events: @Sendable (MCPTransportEvent) -> Void
    let log: @Sendable (_ server: String, _ line: String) -> Void

    init(
        connection: MCPHTTPConnection, budget: MCPMemoryBudget, events: @escaping @Sendable (MCPTransportEvent) -> Void,
        log: @escaping @Sendable (_ server: String, _ line: String) -> Void
    ) {
        self.connection = connection
        inbound = MCPHTTPInbound(budget: budget)
        self.events = events
        self.log = log
    }

    var serverName: String { connection.serverName }
    var isOver: Bool { state.withLock { $0.ended || $0.closing } }

    /// Runs `work` as a task of its own, tracked until it returns; `request` names the
    /// request it answers (so that ``abandon(_:)`` can cancel it).
    func start(request: JSONRPCID?, _ work: @escaping @Sendable () async -> Void) throws(MCPError) {
        let refused: String? = state.withLock { s in
            if s.ended || s.closing { return "server \(goQuote(serverName)) is closed" }
            if s.tasks.count >= Self.maxInFlight { return "server \(goQuote(serverName)) has \(Self.maxInFlight) HTTP requests in flight" }
            let key = s.next
            s.next += 1
            if let request { s.requests[request] = key }
            // Created under the lock: the task's own removal waits for the insertion.
            s.tasks[key] = Task { [weak self] in
                await work()
                self?.finished(key, request: request)
            }
            return nil
        }
        if let refused { throw MCPError(.unavailable, refused) }
    }

    private func finished(_ key: Int, request: JSONRPCID?) {
        state.withLock { s in
            s.tasks[key] = nil
            if let request, s.requests[request] == key { s.requests[request] = nil }
        }
    }

    /// Cancels the exchange of request `id`, if it still runs.
    func abandon(_ id: JSONRPCID) {
        let task = state.withLock { s in s.requests.removeValue(forKey: id).flatMap { s.tasks[$0] } }
        task?.cancel()
    }

    /// Reports the end once (later reports are dropped) and cancels every exchange.
    func end(_ reason: String) {
        let tasks = state.withLock { s -> [Task<Void, Never>]? in
            guard !s.ended else { return nil }
            s.ended = true
            return Array(s.tasks.values)
        }
        guard let tasks else { return }
        for task in tasks { task.cancel() }
        events(.ended(reason))
    }

    /// Hands a `data:` payload or a JSON body to the session (unless it is a request or
    /// notification past the server's rate, dropped); returns the message when it is one.
    @discardableResult
    func deliver(_ bytes: [UInt8]) -> JSONRPCMessage? {
        do throws(JSONRPCMessage.ParseError) {
            let message = try JSONRPCMessage.parse(bytes)
            if inbound.admit(message) { events(.message(message)) }
            return message
        } catch {
            events(.invalid(error.description))
            return nil
        }
    }

    /// Closes: no new exchanges, those in flight cancelled and awaited, `goodbye` (the
    /// DELETE of a session) run, the end reported. A second call waits
    /// for the first.
    func close(goodbye: @Sendable () async -> Void) async {
        let first = state.withLock { s -> Bool in
            defer { s.closing = true }
            return !s.closing
        }
        guard first else { return await closed.wait() }
        while true {
            let tasks = state.withLock { Array($0.tasks.values) }
            if tasks.isEmpty { break }
            for task in tasks { task.cancel() }
            for task in tasks { await task.value }
        }
        await goodbye()
        connection.closeIdleConnections()
        end("server \(goQuote(serverName)) was closed")
        closed.open()
    }
}
