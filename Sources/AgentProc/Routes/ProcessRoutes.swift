import AgentCore
import CoreMetrics
import AgentHTTP
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import HTTPTypes
import Hummingbird
import NIOCore

/// The process API's HTTP handlers; ``ProcessModule`` mounts them.
struct ProcessRoutes: Sendable {
    let manager: ProcessManager

    /// Every route, relative to the module's mount point (`/api/v0/processes`), behind the
    /// chat middleware. Handlers run on the pool (a start clones and execs and opens spool
    /// files; a listing reaps, which retires spools), except the status, a few fields from
    /// memory, and the output, which answers from memory (at most the 32 KiB head and tail)
    /// on the loop, so a wait for the exit is resumed straight onto the connection's loop
    /// (only its offset reads of the spool go to the pool). The input routes run on the loop
    /// too: a write to the child's non-blocking pipe or terminal waits for room as an event
    /// (`WritableWaiter`), never blocking, and a resize is one `ioctl` and a signal.
    func add(to routes: inout AgentRoutes) {
        routes.add(middleware: ChatIdentityMiddleware())
        routes.post("start") { request, context in try await self.start(request, context) }
        routes.get("list") { request, context in try self.list(request, context) }
        routes.get("status", executor: .eventLoop) { request, context in self.status(request, context) }
        routes.get(":id/output", executor: .eventLoop) { request, context in try await self.output(request, context) }
        routes.post(":id/signal") { request, context in try await self.signal(request, context) }
        routes.post(":id/stdin", executor: .eventLoop) { request, context in try await self.stdin(request, context) }
        routes.post(":id/stdin/close", executor: .eventLoop) { request, context in try await self.closeStdin(request, context) }
        routes.post(":id/resize", executor: .eventLoop) { request, context in try await self.resize(request, context) }
        routes.webSocket(ProcessStream(manager: manager).route(path: ":id/stream"))
    }

    // MARK: Handlers

    func start(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        let chat = context.chat
        let toolCall = try ToolCallKey.from(request.headers, chat: chat)
        let fields = try Self.startRequest(
            try await JSONRequest.decode(request, context: context, typeName: "StartProcessRequest"))
        guard let (key, ageMs) = toolCall else {
            let process: ManagedProcess
            do {
                process = try await manager.start(
                    command: fields.command, workdir: fields.workdir, environment: fields.env, background: fields.background,
                    chat: chat, options: fields.options)
            } catch {
                throw Self.startError(error)
            }
            return JSONResponse.make(StartResponse(started: process))
        }
        let outcome: ProcessManager.StartOnce
        do {
            outcome = try await manager.startOnce(
                command: fields.command, workdir: fields.workdir, environment: fields.env, background: fields.background,
                chat: chat, options: fields.options, toolCall: key, ageMs: ageMs)
        } catch {
            throw Self.startError(error)
        }
        switch outcome {
        case .started(let process):
            return JSONResponse.make(StartResponse(started: process))
        case .attached(let id, let process, let exit):
            return JSONResponse.make(StartResponse(attached: id, process: process, exit: exit))
        case .mismatch:
            return JSONResponse.make(
                ToolCallRefusal.inputMismatch("This tool call started a process with a different request."),
                status: .conflict)
        case .unknownBeforeHorizon:
            return JSONResponse.make(
                ToolCallRefusal.agentStartedAfterCall("This tool call is older than the agent's record of tool calls; it may have run."),
                status: .conflict)
        case .notRecorded(let reason):
            throw APIError(
                .serviceUnavailable, "The tool call could not be recorded, so it was not started.",
                detail: "Writing its claim to \(ToolCallStarts.fileName) failed (\(reason)); nothing ran. Retry once the state directory's disk has room.")
        }
    }

    /// A failed start: 500 with what failed.
    static func startError(_ error: ProcessManager.StartFailure) -> APIError {
        let detail =
            switch error {
            case .closed: "manager is closed"
            case .tooManyProcesses(let limit): "too many running processes (limit \(limit))"
            case .spawn(let reason): reason
            }
        return APIError(.internalServerError, "Failed to start process.", detail: detail)
    }

    /// `GET /status`: whether output is spooled, and the failed writes of the files that
    /// outlive the agent.
    func status(_ request: Request, _ context: AgentRequestContext) -> Response {
        JSONResponse.make(StatusResponse(manager))
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
        let query = try OutputQuery(GoQuery(request), maxWait: manager.configuration.maxWait)
        if let read = query.cursor {
            guard manager.spooling || process.spool != nil else {
                throw APIError(
                    .conflict, "Output of process \(goQuote(id)) is not spooled.",
                    detail: "Offset reads need the output spool (--proc-spool, on by default, and a writable state dir).")
            }
            // Reads the spool file: on the pool, not the loop.
            return await withTaskExecutorPreference(RouteExecutor.poolExecutor) {
                JSONResponse.make(CursorResponse(process, read: read))
            }
        }
        if let awaited = query.`await` {
            let (condition, match): (AwaitCondition, OutputWatch.Match?)
            do {
                (condition, match) = try await manager.awaitCondition(
                    process, awaited, clientGone: context.clientGone, timerLoop: context.channel.eventLoop)
            } catch {
                throw APIError(
                    .tooManyRequests, "Too many awaits.",
                    detail: "At most \(ManagedProcess.maxWatches) per process wait for output, and \(manager.configuration.maxAwaits) in all for output or a port, at once.")
            }
            var answer = OutputResponse(process, process.snapshot())
            answer.condition = condition.rawValue
            answer.match = match.map { MatchResponse(line: String(goDecoding: $0.line), offset: $0.offset) }
            return JSONResponse.make(answer)
        }
        if query.wait {
            await manager.waitForExit(process, clientGone: context.clientGone, timerLoop: context.channel.eventLoop)
        }
        return JSONResponse.make(OutputResponse(process, process.snapshot()))
    }

    // MARK: stdin and terminal

    /// `POST /{id}/stdin`: the raw body goes to the child's stdin, after earlier writes.
    func stdin(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        let (id, input) = try inputOf(context)
        var request = request
        let body: ByteBuffer
        do {
            body = try await request.collectBody(upTo: ProcessInput.maxWriteBytes)
        } catch {
            ProcessMetrics.stdinRefused("too_large")
            throw APIError(
                .contentTooLarge, "Input is too large.",
                detail: "At most \(ProcessInput.maxWriteBytes) bytes per call; send more in further calls.")
        }
        let bytes = Array(body.readableBytesView)
        switch await input.write(bytes, timeout: manager.configuration.stdinWriteTimeout) {
        case .success(let written):
            ProcessMetrics.stdinBytes.increment(by: written)
            return JSONResponse.make(StdinResponse(written: written))
        case .failure(let failure):
            throw Self.inputError(failure, id: id)
        }
    }

    /// `POST /{id}/stdin/close`: end-of-file (a pipe closes; a terminal gets ^D).
    func closeStdin(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        let (id, input) = try inputOf(context)
        switch await input.close(timeout: manager.configuration.stdinWriteTimeout) {
        case .success:
            return JSONResponse.make(MessageResponse(message: "Input of process \(goQuote(id)) closed."))
        case .failure(let failure):
            throw Self.inputError(failure, id: id)
        }
    }

    /// `POST /{id}/resize {"rows","cols"}`: the terminal's size (SIGWINCH to the child).
    func resize(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        let id = Self.processID(context)
        guard let process = manager.lookup(id, chat: context.chat) else { throw Self.notFound(id) }
        let body = try await JSONRequest.decode(request, context: context, typeName: "ResizeRequest")
        let (rows, cols) = try Self.dimensions(body)
        guard let input = process.input, input.kind == .terminal else {
            if process.input == nil, process.options.terminal != nil {
                throw APIError(.conflict, "Process \(goQuote(id)) is not running.", detail: Self.lostAtRestart(process, what: "terminal"))
            }
            throw APIError(.conflict, "Process \(goQuote(id)) has no terminal.")
        }
        guard input.resize(rows: rows, cols: cols) else {
            throw APIError(.conflict, "Process \(goQuote(id)) is not running.")
        }
        return JSONResponse.make(MessageResponse(message: "Terminal of process \(goQuote(id)) resized to \(rows)x\(cols)."))
    }

    private func inputOf(_ context: AgentRequestContext) throws(APIError) -> (String, ProcessInput) {
        let id = Self.processID(context)
        guard let process = manager.lookup(id, chat: context.chat) else { throw Self.notFound(id) }
        guard let input = process.input else {
            ProcessMetrics.stdinRefused("closed")
            if process.options.stdin {
                throw APIError(
                    .conflict, "Input of process \(goQuote(id)) is closed.",
                    detail: Self.lostAtRestart(process, what: "stdin") ?? "stdin was closed or the process exited.")
            }
            throw APIError(.conflict, "Process \(goQuote(id)) was not started with stdin.", detail: "Start it with \"stdin\": true or \"pty\".")
        }
        return (id, input)
    }

    /// For a process restored after an agent restart (one started with stdin or a terminal
    /// that has none: a live one always has it), whose end the agent did not see: why its
    /// `what` is gone. Nil for one that exited.
    private static func lostAtRestart(_ process: ManagedProcess, what: String) -> String? {
        process.lost ? "The agent restarted while the process ran: its \(what) did not survive the restart." : nil
    }

    static func inputError(_ failure: ProcessInput.Failure, id: String) -> APIError {
        switch failure {
        case .closed:
            ProcessMetrics.stdinRefused("closed")
            return APIError(.conflict, "Input of process \(goQuote(id)) is closed.", detail: "stdin was closed or the process exited.")
        case .closedAfter(let written):
            ProcessMetrics.stdinRefused("closed")
            return APIError(
                .conflict, "Input of process \(goQuote(id)) is closed.",
                detail: "stdin was closed or the process exited after \(written) bytes were written; the rest was not.")
        case .stalled(let written):
            ProcessMetrics.stdinRefused("stalled")
            return APIError(
                .gatewayTimeout, "Process \(goQuote(id)) did not read its input in time.",
                detail: "\(written) bytes were written before the wait for the child ended; the rest was not.")
        case .behindStalled:
            ProcessMetrics.stdinRefused("stalled")
            return APIError(
                .gatewayTimeout, "Process \(goQuote(id)) did not read its input in time.",
                detail: "0 bytes were written: a write before it was not read in time, so this one was not tried.")
        case .expired:
            ProcessMetrics.stdinRefused("stalled")
            return APIError(
                .gatewayTimeout, "Process \(goQuote(id)) did not read its input in time.",
                detail: "0 bytes were written: its time ran out while the writes before it waited.")
        case .lineTooLong:
            ProcessMetrics.stdinRefused("line_too_long")
            return APIError(
                .contentTooLarge, "Input is longer than the terminal's line.",
                detail: "The terminal is in line (canonical) mode: it keeps at most \(TerminalLine.maxLineBytes) bytes of a line until a newline and would silently discard the rest. Nothing of this call was written; end the line (\\n or \\r) sooner.")
        case .busy:
            ProcessMetrics.stdinRefused("busy")
            return APIError(
                .tooManyRequests, "Too much input is waiting for process \(goQuote(id)).",
                detail: "At most \(ProcessInput.maxQueuedBytes) bytes may wait; nothing of this call was written.")
        case .tooLarge:
            ProcessMetrics.stdinRefused("too_large")
            return APIError(.contentTooLarge, "Input is too large.", detail: "At most \(ProcessInput.maxWriteBytes) bytes per call.")
        case .failed(let reason, let written):
            ProcessMetrics.stdinRefused("error")
            return APIError(.internalServerError, "Failed to write input.", detail: "\(reason) (\(written) bytes written first)")
        }
    }

    /// `rows` and `cols` of a resize or a `pty` object: both required, 1...10000.
    static func dimensions(_ body: JSONRequest) throws(APIError) -> (UInt16, UInt16) {
        let rows = try body.int("rows")
        let cols = try body.int("cols")
        guard let rows, let cols, (1...Int(StartOptions.maxDimension)).contains(rows), (1...Int(StartOptions.maxDimension)).contains(cols) else {
            throw APIError(
                .badRequest, "Terminal size is invalid.",
                detail: "rows and cols must both be between 1 and \(StartOptions.maxDimension).",
                validations: [.init(field: "rows", detail: "1...\(StartOptions.maxDimension)"), .init(field: "cols", detail: "1...\(StartOptions.maxDimension)")])
        }
        return (UInt16(rows), UInt16(cols))
    }

    func signal(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        let chat = context.chat
        let id = Self.processID(context)
        // Order matters for compatibility: foreign chat, body, name, unknown, state.
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
    /// background flag, none holding a NUL, and the optional `stdin` and `pty`; 400 otherwise.
    static func startRequest(_ body: JSONRequest) throws(APIError) -> StartFields {
        let command = try body.string("command") ?? ""
        let workdir = try body.string("workdir")
        let env = try body.stringMap("env")
        let background = try body.bool("background") ?? false
        let stdin = try body.bool("stdin") ?? false
        var terminal: StartOptions.Terminal?
        if let pty = body.value("pty"), pty != .null {
            guard case .object = pty else { throw body.mismatch("pty", pty, "workspacesdk.ProcessPTY") }
            let nested = body.with(pty, at: "pty")
            let (rows, cols) = try dimensions(nested)
            let term = try nested.string("term")
            if let term, term.isEmpty || term.utf8.count > 64 || !term.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) {
                throw APIError(
                    .badRequest, "Terminal type is invalid.", detail: "term must be 1 to 64 printable ASCII characters.",
                    validations: [.init(field: "pty.term", detail: "1 to 64 printable ASCII characters")])
            }
            terminal = StartOptions.Terminal(rows: rows, cols: cols, term: term)
        }
        guard !command.isEmpty else { throw APIError(.badRequest, "Command is required.") }
        try rejectNUL(command: command, workdir: workdir, env: env)
        return StartFields(
            command: command, workdir: workdir, env: env, background: background,
            options: StartOptions(stdin: stdin, terminal: terminal))
    }

    /// What a start body asks for.
    struct StartFields: Sendable {
        var command: String
        var workdir: String?
        var env: [String: String]?
        var background: Bool
        var options: StartOptions
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
