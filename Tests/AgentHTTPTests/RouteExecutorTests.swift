import AgentCore
@testable import AgentHTTP
import AgentTestSupport
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import Testing

/// Where a route's handler runs (``RouteExecutor``): on the connection's event loop, or on
/// Swift's global executor with its body read and its response written from the loop. A
/// real server on loopback whose routes report the thread they ran on.
@Suite(.timeLimit(.minutes(2)))
struct RouteExecutorTests {
    static func withServer(_ body: (Int) async throws -> Void) async throws {
        var routes = AgentRoutes()
        let whereAmI: @Sendable (Request, AgentRequestContext) async throws -> String = { _, context in
            context.channel.eventLoop.inEventLoop ? "loop" : "pool"
        }
        routes.get("/loop/where", executor: .eventLoop, use: whereAmI)
        routes.get("/pool/where", executor: .pool, use: whereAmI)
        // Answers at once: on the loop, outside any task, with its path parameter.
        routes.add(
            AgentRoute(.get, "/now/:id") { _, context in
                let task = withUnsafeCurrentTask { $0 != nil } ? "task" : "no task"
                let place = context.channel.eventLoop.inEventLoop ? "loop" : "pool"
                let id = context.parameters.get("id") ?? "?"
                return ImmediateResponse(headers: [.contentType: "text/plain"], body: ByteBuffer(string: "\(place) \(task) \(id)"))
            })
        routes.add(AgentRoute(.get, "/refuse/now") { _, _ in throw APIError(.conflict, "Not now.", detail: "A test's refusal.") })
        // A route's own length and date are replaced; a 204 goes without a body or a length.
        routes.add(
            AgentRoute(.get, "/now/fields/set") { _, _ in
                ImmediateResponse(headers: [.contentLength: "999", .date: "yesterday", .cacheControl: "no-store"], body: ByteBuffer(string: "four"))
            })
        routes.add(AgentRoute(.get, "/now/fields/empty") { _, _ in ImmediateResponse(status: .noContent, headers: [:], body: ByteBuffer(string: "dropped")) })
        // Constant answers: written from their serialized head with no request value; one
        // that sets a field the server owns (Date) goes the immediate handler's way instead.
        // (Its immediate handler answers otherwise, to show which one the connection used.)
        var constant = AgentRoute(
            .get, "/const/plain",
            answer: ImmediateResponse(headers: [.contentType: "text/plain", .cacheControl: "no-store"], body: ByteBuffer(string: "same")))
        constant.immediate = { _, _ in ImmediateResponse(headers: [:], body: ByteBuffer(string: "not the constant")) }
        routes.add(constant)
        routes.add(
            AgentRoute(.get, "/const/dated", answer: ImmediateResponse(headers: [.date: "yesterday"], body: ByteBuffer(string: "dated"))))
        routes.add(AgentRoute(.get, "/const/empty", answer: ImmediateResponse(status: .noContent, headers: [:], body: ByteBuffer(string: "x"))))
        // Bodies of a declared length, collected before the head goes out: in parts, longer
        // than declared, failing before a byte, longer than may be collected.
        let parts = ResponseBody(contentLength: 6) { writer in
            try await writer.write(ByteBuffer(string: "abc"))
            try await writer.write(ByteBuffer(string: "def"))
            try await writer.finish(nil)
        }
        routes.get("/collect/parts", executor: .eventLoop) { _, _ in Response(status: .ok, headers: [.contentType: "text/plain"], body: parts) }
        let longer = ResponseBody(contentLength: 3) { writer in
            try await writer.write(ByteBuffer(string: "hello"))
            try await writer.finish(nil)
        }
        routes.get("/collect/longer", executor: .eventLoop) { _, _ in Response(status: .ok, body: longer) }
        let failing = ResponseBody(contentLength: 4) { _ in throw APIError(.internalServerError, "Broken body.") }
        routes.get("/collect/failing", executor: .eventLoop) { _, _ in Response(status: .ok, body: failing) }
        let huge = ResponseBody(contentLength: 4) { writer in
            try await writer.write(ByteBuffer(repeating: UInt8(ascii: "h"), count: HTTP1ConnectionHandler.singleFlushLimit + 1))
            try await writer.finish(nil)
        }
        routes.get("/collect/huge", executor: .eventLoop) { _, _ in Response(status: .ok, body: huge) }
        // HEAD on every write path: a constant answer, an immediate one, a collected body and
        // a stream of no declared length that never ends (its head alone must go out).
        routes.add(AgentRoute(.head, "/head/const", answer: ImmediateResponse(headers: [:], body: ByteBuffer(string: "const"))))
        routes.add(AgentRoute(.head, "/head/now") { _, _ in ImmediateResponse(headers: [:], body: ByteBuffer(string: "now!")) })
        routes.on(.head, "/head/collect", executor: .eventLoop) { _, _ in Response(status: .ok, body: parts) }
        routes.on(.head, "/head/stream", executor: .eventLoop) { _, _ in
            Response(status: .ok, body: ResponseBody { _ in try await Task.sleep(for: .seconds(3600)) })
        }
        // A stream of no declared length whose route sets its own length field.
        routes.on(.head, "/head/stream/sized", executor: .eventLoop) { _, _ in
            Response(status: .ok, headers: [.contentLength: "12"], body: ResponseBody { _ in try await Task.sleep(for: .seconds(3600)) })
        }
        // Reads a streamed body off the loop, then answers 256 KiB (several body writes,
        // each flushed: the write path's back pressure from the pool).
        routes.post("/pool/upload", body: .stream(idle: .seconds(60)), executor: .pool) { request, context -> Response in
            let onLoop = context.channel.eventLoop.inEventLoop
            var received = 0
            for try await part in request.body { received += part.readableBytes }
            let total = received
            return Response(
                status: .ok, headers: [.contentType: "text/plain"],
                body: ResponseBody { writer in
                    for _ in 0..<4 { try await writer.write(ByteBuffer(repeating: UInt8(ascii: "x"), count: 64 * 1024)) }
                    try await writer.write(ByteBuffer(string: "\n\(total) \(onLoop ? "loop" : "pool")"))
                    try await writer.finish(nil)
                })
        }
        let logger = {
            var logger = Logger(label: "test"); logger.logLevel = .critical; return logger
        }()
        let registry = HTTPConnectionRegistry()
        let table = try RouteTable(routes: routes.routes)
        let channel = AgentHTTPChannel(
            http: .init(
                responder: AgentResponder(table: table), serverName: "test", logger: logger, accessLog: false, routes: table,
                machine: .init(), registry: registry),
            webSocket: .init(maxFrameSize: 1 << 16, closeTimeout: .seconds(2)),
            decoderLimits: (AgentHTTPLimits.maxHeaderFieldSize, AgentHTTPLimits.maxHeaderListSize, AgentHTTPLimits.maxHeaderFieldCount),
            origin: .http)
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { child in
                channel.setup(channel: child, logger: logger).map { value in
                    Task { await channel.handle(value: value, logger: logger) }
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        do {
            try await body(server.localAddress!.port!)
        } catch {
            registry.closeAll()
            try? await server.close()
            throw error
        }
        registry.closeAll()
        try? await server.close()
    }

    @Test func aLoopRouteRunsOnTheLoopAndAPoolRouteOffIt() async throws {
        try await Self.withServer { port in
            let client = RawHTTPClient(port: port)
            let loop = try await client.request("GET", "/loop/where")
            #expect(loop.status == 200)
            #expect(loop.bodyText == "loop")
            let pool = try await client.request("GET", "/pool/where")
            #expect(pool.status == 200)
            #expect(pool.bodyText == "pool")
        }
    }

    @Test func anImmediateRouteAnswersOnTheLoopWithoutATask() async throws {
        try await Self.withServer { port in
            let client = RawHTTPClient(port: port)
            for id in ["a", "b"] {
                let answer = try await client.request("GET", "/now/\(id)")
                #expect(answer.status == 200)
                #expect(answer.bodyText == "loop no task \(id)")
            }
            let refused = try await client.request("GET", "/refuse/now")
            #expect(refused.status == 409)
            #expect(refused.bodyText.contains(#""message":"Not now.""#), "\(refused.bodyText)")
            let fields = try await client.request("GET", "/now/fields/set")
            #expect(fields.bodyText == "four")
            #expect(fields.header("content-length") == "4")
            #expect(fields.header("cache-control") == "no-store")
            #expect(fields.header("date") != "yesterday" && fields.header("date")?.hasSuffix(" GMT") == true)
            #expect(fields.header("server") == "test")
            let empty = try await client.request("GET", "/now/fields/empty")
            #expect(empty.status == 204)
            #expect(empty.body.isEmpty && empty.header("content-length") == nil)
            // The connection goes on after all of them.
            #expect(try await client.request("GET", "/loop/where").bodyText == "loop")
        }
    }

    /// A constant answer goes out whole, with the server's own Date and Server, on a
    /// connection that goes on (two pipelined in one write) until a request asks to close.
    @Test func aConstantAnswerIsWrittenWholeAndTheConnectionGoesOn() async throws {
        try await Self.withServer { port in
            let socket = try #require(await LoopbackSocket.connect(port: port))
            let get = { (path: String, close: Bool) in "GET \(path) HTTP/1.1\r\nHost: x\r\n\(close ? "Connection: close\r\n" : "")\r\n" }
            #expect(socket.send(get("/const/plain", false) + get("/const/empty", false) + get("/const/plain", true)))
            let (bytes, closed) = await socket.readAll()
            #expect(closed)
            let text = String(decoding: bytes, as: UTF8.self)
            let answers = text.split(separator: "HTTP/1.1 ").map { "HTTP/1.1 " + $0 }
            try #require(answers.count == 3, "\(text)")
            let date = try #require(answers[0].split(separator: "\r\n").first { $0.hasPrefix("Date: ") })
            #expect(date.hasSuffix(" GMT") && !date.contains("yesterday"))
            #expect(
                answers[0]
                    == "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nCache-Control: no-store\r\nContent-Length: 4\r\n\(date)\r\nServer: test\r\n\r\nsame")
            // No body, no length for a 204.
            #expect(answers[1] == "HTTP/1.1 204 No Content\r\n\(date)\r\nServer: test\r\n\r\n")
            #expect(answers[2].hasPrefix("HTTP/1.1 200 OK\r\n") && answers[2].contains("\r\nConnection: close\r\n\r\nsame"))
            // The route's own Date is replaced on the immediate handler's way.
            let dated = try await RawHTTPClient(port: port).request("GET", "/const/dated")
            #expect(dated.bodyText == "dated" && dated.header("date")?.hasSuffix(" GMT") == true)
        }
    }

    /// A body of a declared length is collected and goes out with its head: written in
    /// parts, it arrives whole with its length. One that writes another length than it
    /// declared, fails before a byte, or outgrows what may be collected is answered as an
    /// error (its own, else 500), nothing of it half-written, and the connection goes on.
    @Test func aBodyOfADeclaredLengthGoesOutWithItsHead() async throws {
        try await Self.withServer { port in
            let client = RawHTTPClient(port: port)
            let parts = try await client.request("GET", "/collect/parts")
            #expect(parts.status == 200 && parts.bodyText == "abcdef" && parts.header("content-length") == "6")
            #expect(parts.header("content-type") == "text/plain" && parts.header("server") == "test")
            let longer = try await client.request("GET", "/collect/longer")
            #expect(longer.status == 500 && longer.bodyText.contains("declared 3 bytes and wrote 5"), "\(longer)")
            let failing = try await client.request("GET", "/collect/failing")
            #expect(failing.status == 500 && failing.bodyText.contains("Broken body."), "\(failing)")
            let huge = try await client.request("GET", "/collect/huge")
            #expect(huge.status == 500 && huge.bodyText.contains("wrote more"), "\(huge)")
            // Each answered on a connection that then serves the next request.
            let socket = try #require(await LoopbackSocket.connect(port: port))
            let get = { (path: String, close: Bool) in "GET \(path) HTTP/1.1\r\nHost: x\r\n\(close ? "Connection: close\r\n" : "")\r\n" }
            #expect(socket.send(get("/collect/failing", false) + get("/collect/parts", true)))
            let (bytes, closed) = await socket.readAll()
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(closed && text.hasPrefix("HTTP/1.1 500 ") && text.hasSuffix("\r\n\r\nabcdef"), "\(text)")
        }
    }

    /// A HEAD's answer is its head alone, on every write path and for a refusal by the
    /// route table (405, 404), so the next answer on the connection is read as such: seven
    /// HEADs pipelined with a GET behind them.
    @Test func aHeadIsAnsweredWithoutABody() async throws {
        try await Self.withServer { port in
            let socket = try #require(await LoopbackSocket.connect(port: port))
            let head = { (path: String) in "HEAD \(path) HTTP/1.1\r\nHost: x\r\n\r\n" }
            let paths = ["/head/const", "/head/now", "/head/collect", "/head/stream", "/head/stream/sized", "/const/plain", "/no/such/route"]
            #expect(socket.send(paths.map(head).joined() + "GET /const/plain HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
            let (bytes, closed) = await socket.readAll()
            #expect(closed)
            let text = String(decoding: bytes, as: UTF8.self)
            let answers = text.split(separator: "HTTP/1.1 ").map { "HTTP/1.1 " + $0 }
            try #require(answers.count == paths.count + 1, "\(text)")
            let statuses = answers.map { $0.dropFirst(9).prefix(3) }
            #expect(statuses == ["200", "200", "200", "200", "200", "405", "404", "200"], "\(text)")
            // The length the body would have had, where it is known; no body bytes.
            let lengths = answers.map { answer in answer.split(separator: "\r\n").first { $0.hasPrefix("Content-Length: ") }.map(String.init) }
            #expect(lengths[0] == "Content-Length: 5" && lengths[1] == "Content-Length: 4" && lengths[2] == "Content-Length: 6")
            #expect(lengths[3] == nil && lengths[4] == "Content-Length: 12")
            for answer in answers.dropLast() { #expect(answer.hasSuffix("\r\n\r\n"), "\(answer)") }
            #expect(answers.last!.hasSuffix("\r\n\r\nsame"))
        }
    }

    @Test func middlewareAroundAnImmediateRouteTakesTheTaskPath() throws {
        var plain = AgentRoutes()
        plain.add(AgentRoute(.get, "/x") { _, _ in ImmediateResponse(headers: [:], body: ByteBuffer()) })
        #expect(plain.routes[0].immediate != nil)
        var wrapped = AgentRoutes()
        wrapped.add(middleware: ChatIdentityMiddleware())
        wrapped.add(AgentRoute(.get, "/x") { _, _ in ImmediateResponse(headers: [:], body: ByteBuffer()) })
        #expect(wrapped.routes[0].immediate == nil)
        #expect(RouteTable.health.immediate != nil && RouteTable.health.constant != nil)
        var constant = AgentRoutes()
        constant.add(middleware: ChatIdentityMiddleware())
        constant.add(AgentRoute(.get, "/x", answer: ImmediateResponse(headers: [:], body: ByteBuffer())))
        #expect(constant.routes[0].immediate == nil && constant.routes[0].constant == nil)
    }

    @Test func aPoolRouteStreamsItsBodyInAndItsResponseOut() async throws {
        try await Self.withServer { port in
            let upload = [UInt8](repeating: 7, count: 3 << 20)
            let response = try await RawHTTPClient(port: port).request("POST", "/pool/upload", body: upload, timeout: .seconds(60))
            #expect(response.status == 200)
            let trailer: String = "\n" + String(upload.count) + " pool"
            let streamed: Int = 4 * 64 * 1024
            #expect(response.body.count == streamed + trailer.utf8.count)
            #expect(response.bodyText.hasSuffix(trailer))
        }
    }
}
