import AgentCore
import AgentHTTP
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import NIOCore

/// The process API's HTTP handlers (spec process-api §2); ``ProcessModule`` mounts them.
struct ProcessRoutes: Sendable {
    let manager: ProcessManager

    /// Every route, relative to the module's mount point (`/api/v0/processes`), behind the
    /// chat middleware.
    func collection() -> RouteCollection<AgentRequestContext> {
        let routes = RouteCollection(context: AgentRequestContext.self).add(middleware: ChatIdentityMiddleware())
        routes.post("start") { request, context in try await self.start(request, context) }
        routes.get("list") { request, context in try self.list(request, context) }
        routes.get(":id/output") { request, context in try await self.output(request, context) }
        routes.post(":id/signal") { request, context in try await self.signal(request, context) }
        return routes
    }

    func webSocketCollection() -> WebSocketRouteCollection {
        var routes = WebSocketRouteCollection()
        routes.add(ProcessStream(manager: manager).route(path: ":id/stream"))
        return routes
    }

    // MARK: Handlers

    func start(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        let chat = context.chat
        let (command, workdir, env, background) = try Self.startRequest(
            try await JSONRequest.decode(request, context: context, typeName: "StartProcessRequest"))
        do {
            let process = try await manager.start(
                command: command, workdir: workdir, environment: env, background: background, chat: chat)
            return JSONResponse.make(StartResponse(id: process.id, started: true))
        } catch {
            let detail = switch error {
            case .closed: "manager is closed"
            case .tooManyProcesses(let limit): "too many running processes (limit \(limit))"
            case .spawn(let reason): reason
            }
            throw APIError(.internalServerError, "Failed to start process.", detail: detail)
        }
    }

    func list(_ request: Request, _ context: AgentRequestContext) throws -> Response {
        let chat = context.chat
        let processes = manager.list(chat: chat).map(ProcessInfoResponse.init)
        return JSONResponse.make(ListResponse(processes: processes))
    }

    func output(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        let chat = context.chat
        let id = Self.processID(context)
        guard let process = manager.lookup(id, chat: chat) else { throw Self.notFound(id) }
        if request.uri.queryParameters.get("wait") == "true" {
            await manager.waitForExit(process, clientGone: context.clientGone, timerLoop: context.channel.eventLoop)
        }
        return JSONResponse.make(OutputResponse(process, process.snapshot()))
    }

    func signal(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        let chat = context.chat
        let id = Self.processID(context)
        // Order matters for compatibility (spec §2.4): foreign chat, body, name, unknown, state.
        if manager.isForeign(id, chat: chat) { throw Self.notFound(id) }
        let body = try await JSONRequest.decode(request, context: context, typeName: "SignalProcessRequest")
        let name = try body.string("signal") ?? ""
        guard !name.isEmpty else { throw APIError(.badRequest, "Signal is required.") }
        guard let signal = ProcessManager.SignalName(rawValue: name) else {
            throw APIError(.badRequest, "Unsupported signal \(goQuote(name)). Use \"kill\" or \"terminate\".")
        }
        guard let process = manager.lookup(id, chat: chat) else { throw Self.notFound(id) }
        do {
            try manager.signal(process, signal)
        } catch {
            switch error {
            case .notRunning: throw APIError(.conflict, "Process \(goQuote(id)) is not running.")
            case .failed(let reason): throw APIError(.internalServerError, "Failed to signal process.", detail: reason)
            }
        }
        return JSONResponse.make(MessageResponse(message: "Signal \(goQuote(name)) sent to process \(goQuote(id))."))
    }

    // MARK: Helpers

    /// A start body's fields: a command (required), working directory, environment and
    /// background flag, none holding a NUL; 400 otherwise.
    static func startRequest(_ body: JSONRequest) throws(APIError) -> (
        command: String, workdir: String?, env: [String: String]?, background: Bool
    ) {
        let command = try body.string("command") ?? ""
        let workdir = try body.string("workdir")
        let env = try body.stringMap("env")
        let background = try body.bool("background") ?? false
        guard !command.isEmpty else { throw APIError(.badRequest, "Command is required.") }
        try rejectNUL(command: command, workdir: workdir, env: env)
        return (command, workdir, env, background)
    }

    /// exec(2) takes C strings: a NUL would silently cut the command, directory or variable
    /// (`echo visible\u0000; rm x` would run `echo visible`). The reference fails such a
    /// start with EINVAL; we answer 400 naming the field, and nothing runs.
    static func rejectNUL(command: String, workdir: String?, env: [String: String]?) throws(APIError) {
        func refuse(_ field: String, _ what: String) -> APIError {
            APIError(
                .badRequest, "Request contains a NUL byte.", detail: "\(what) contains a NUL byte.",
                validations: [.init(field: field, detail: "must not contain a NUL byte")])
        }
        if command.utf8.contains(0) { throw refuse("command", "command") }
        if let workdir, workdir.utf8.contains(0) { throw refuse("workdir", "workdir") }
        for (key, value) in env ?? [:] {
            if key.utf8.contains(0) { throw refuse("env", "env key \(goQuote(key))") }
            if value.utf8.contains(0) { throw refuse("env", "env[\(goQuote(key))]") }
        }
    }

    /// The `{id}` path parameter, percent-decoded as Go's router sees it.
    static func processID(_ context: AgentRequestContext) -> String {
        processID(context.parameters.get("id") ?? "")
    }

    /// The same for a raw path segment.
    static func processID(_ raw: String) -> String {
        guard raw.contains("%") else { return raw }
        return raw.percentDecoded() ?? raw
    }

    static func notFound(_ id: String) -> APIError {
        APIError(.notFound, "Process \(goQuote(id)) not found.")
    }
}
