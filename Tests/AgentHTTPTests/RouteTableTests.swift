@testable import AgentHTTP
import AgentCore
import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing

/// The one route table: trie rules on bytes, 405 with `Allow`, WebSocket routes beside
/// plain ones, and each route's body mode and executor as the connection core asks for them.
struct RouteTableTests {
    static func request(_ method: HTTPRequest.Method, _ path: String) -> Request {
        Request(head: HTTPRequest(method: method, scheme: nil, authority: nil, path: path), body: .init(buffer: ByteBuffer()))
    }

    /// What `path` answers: status and body text.
    static func answer(_ responder: AgentResponder, _ method: HTTPRequest.Method, _ path: String) async throws -> (HTTPResponse.Status, String) {
        let response = await responder.respond(to: request(method, path), context: AgentRouterTests.context())
        return (response.status, try await AgentRouterTests.text(response))
    }

    static func echo(_ name: String) -> @Sendable (Request, AgentRequestContext) async throws -> String {
        { _, context in "\(name) \(context.parameters.rawParameters.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" })" }
    }

    @Test func literalsComeBeforeCapturesAndFallBackToThem() async throws {
        var routes = AgentRoutes()
        routes.get("/p/list", use: Self.echo("list"))
        routes.get("/p/:id", use: Self.echo("id"))
        routes.get("/p/:id/x", use: Self.echo("x"))
        routes.get("/p/list/y", use: Self.echo("y"))
        let responder = AgentResponder(table: try RouteTable(routes: routes.routes))
        #expect(try await Self.answer(responder, .get, "/p/list") == (.ok, "list []"))
        #expect(try await Self.answer(responder, .get, "/p/7") == (.ok, #"id ["id=7"]"#))
        // `list` has no `x` below it: the capture takes the component.
        #expect(try await Self.answer(responder, .get, "/p/list/x") == (.ok, #"x ["id=list"]"#))
        #expect(try await Self.answer(responder, .get, "/p/list/y") == (.ok, "y []"))
        // Empty components and a trailing slash are skipped.
        #expect(try await Self.answer(responder, .get, "//p//7/") == (.ok, #"id ["id=7"]"#))
        // Percent-escapes are not decoded.
        #expect(try await Self.answer(responder, .get, "/p/a%2Fb") == (.ok, #"id ["id=a%2Fb"]"#))
        #expect(try await Self.answer(responder, .get, "/p/7/z").0 == .notFound)
    }

    /// Paths are compared byte for byte: no Unicode equivalence (Hummingbird's trie compares
    /// Swift strings, where `é` equals `e` + U+0301 and the Kelvin sign equals `K`).
    @Test func nonASCIIPathsMatchByteForByte() async throws {
        var routes = AgentRoutes()
        routes.get("/caf\u{E9}", use: Self.echo("cafe"))
        routes.get("/K", use: Self.echo("K"))
        routes.get("/n/:name", use: Self.echo("name"))
        let responder = AgentResponder(table: try RouteTable(routes: routes.routes))
        #expect(try await Self.answer(responder, .get, "/caf\u{E9}") == (.ok, "cafe []"))
        #expect(try await Self.answer(responder, .get, "/cafe\u{301}").0 == .notFound)
        #expect(try await Self.answer(responder, .get, "/\u{212A}").0 == .notFound)
        #expect(try await Self.answer(responder, .get, "/K") == (.ok, "K []"))
        // A captured component keeps its bytes.
        #expect(try await Self.answer(responder, .get, "/n/\u{212A}\u{E9}/") == (.ok, "name [\"name=\u{212A}\u{E9}\"]"))
        #expect(try await Self.answer(responder, .get, "/n/cafe\u{301}") == (.ok, "name [\"name=cafe\u{301}\"]"))
    }

    @Test func aRoutedPathWithAnotherMethodIs405WithAllow() async throws {
        var routes = AgentRoutes()
        routes.get("/r/:id", use: Self.echo("get"))
        routes.post("/r/:id", use: Self.echo("post"))
        let table = try RouteTable(routes: routes.routes)
        let response = await AgentResponder(table: table).respond(to: Self.request(.put, "/r/1"), context: AgentRouterTests.context())
        #expect(response.status == .methodNotAllowed)
        #expect(response.headers[.allow] == "GET, POST")
        #expect(try await AgentRouterTests.text(response) == #"{"detail":"PUT /r/1; allowed: GET, POST","message":"Method not allowed."}"# + "\n")
        // The connection core reads a 405's or 404's body as nothing routes it.
        #expect(table.info(method: .put, path: "/r/1").executor == .eventLoop)
        #expect(table.info(method: .get, path: "/nowhere").body == AgentRoute.collectedBody)
    }

    /// A WebSocket route is a GET route of the same trie: its upgrade (with parameters) for
    /// the connection core, its plain-HTTP twin for the responder; a literal sibling wins.
    @Test func webSocketRoutesShareTheTable() async throws {
        var routes = AgentRoutes()
        routes.get("/p/list", use: Self.echo("list"))
        routes.get("/p/list/stream", use: Self.echo("list stream"))
        routes.webSocket("/p/:id/stream") { request throws(APIError) in
            if request.parameters["id"] == "refused" { throw APIError(.notFound, "No such process.") }
        } handler: { _, _, _ in
        }
        let table = try RouteTable(routes: routes.routes)
        let upgrade = try #require(table.info(method: .get, path: "/p/7/stream").webSocket)
        #expect(upgrade.route.path == "/p/:id/stream" && upgrade.parameters == ["id": "7"])
        #expect(table.info(method: .get, path: "/p/list/stream").webSocket == nil)
        #expect(table.info(method: .post, path: "/p/7/stream").webSocket == nil)
        #expect(
            table.routeList.map { "\($0.method) \($0.path) \($0.webSocket)" } == [
                "GET /p/list false", "GET /p/list/stream false", "GET /p/{id}/stream true",
            ])
        let responder = AgentResponder(table: table)
        let plain = await responder.respond(to: Self.request(.get, "/p/7/stream"), context: AgentRouterTests.context())
        #expect(plain.status == .upgradeRequired && plain.headers[.secWebSocketVersion] == "13")
        #expect(try await Self.answer(responder, .get, "/p/refused/stream").0 == .notFound)
        // The head's one lookup carries what the upgrade and the responder need.
        let resolved = table.info(method: .get, path: "/p/8/stream")
        #expect(resolved.webSocket?.parameters == ["id": "8"])
        #expect(resolved.timers?.route == "/p/{id}/stream")
        let twin = await responder.respond(to: Self.request(.get, "/p/8/stream"), context: AgentRouterTests.context(), route: resolved)
        #expect(twin.status == .upgradeRequired)
        #expect(table.info(method: .get, path: "/p/list").webSocket == nil)
    }

    /// Each kind of route reports its own body mode and executor.
    @Test func infoReportsBodyModeAndExecutor() throws {
        var routes = AgentRoutes()
        routes.get("/plain", use: Self.echo("plain"))
        routes.get("/cheap", executor: .eventLoop, use: Self.echo("cheap"))
        routes.post("/upload", body: .stream(idle: .seconds(5)), use: Self.echo("upload"))
        routes.post("/small", body: .collect(limit: 10), use: Self.echo("small"))
        routes.post("/u/:id/upload", body: AgentRoute.streamedBody, use: Self.echo("upload id"))
        routes.webSocket("/ws", executor: .eventLoop, check: { _ throws(APIError) in }, handler: { _, _, _ in })
        let table = try RouteTable(routes: routes.routes)
        func info(_ method: HTTPRequest.Method, _ path: Substring) -> String {
            let info = table.info(method: method, path: path)
            return "\(info.body) \(info.executor) \(info.webSocket != nil)"
        }
        let collected = "\(AgentRoute.collectedBody)"
        #expect(info(.get, "/plain") == "\(collected) pool false")
        #expect(info(.get, "/cheap") == "\(collected) eventLoop false")
        #expect(info(.post, "/upload") == "stream(idle: 5.0 seconds) pool false")
        #expect(info(.post, "/small") == "collect(limit: 10) pool false")
        #expect(info(.post, "/u/1/upload") == "\(RouteBodyMode.stream(idle: AgentHTTPLimits.requestBodyTimeout)) pool false")
        #expect(info(.get, "/ws") == "\(collected) eventLoop true")
    }

    /// A path that captures nothing resolves to one ``RouteInfo`` made with the table; a
    /// captured path gets its own per request, with its parameters.
    @Test func aLiteralPathsInfoIsMadeOnce() throws {
        var routes = AgentRoutes()
        routes.get("/plain", use: Self.echo("plain"))
        routes.post("/plain", use: Self.echo("plain post"))
        routes.get("/u/:id", use: Self.echo("id"))
        routes.webSocket("/u/:id/ws", check: { _ throws(APIError) in }, handler: { _, _, _ in })
        let table = try RouteTable(routes: routes.routes)
        #expect(table.info(method: .get, path: "/plain") === table.info(method: .get, path: "/plain/"))
        #expect(table.info(method: .post, path: "/plain") !== table.info(method: .get, path: "/plain"))
        guard case .route(let route, _, _)? = table.info(method: .post, path: "/plain").resolution else {
            Issue.record("no route")
            return
        }
        #expect(route.method == .post)
        guard case .methodNotAllowed? = table.info(method: .put, path: "/plain").resolution else {
            Issue.record("PUT /plain is not 405")
            return
        }
        #expect(table.info(method: .get, path: "/u/1") !== table.info(method: .get, path: "/u/1"))
        #expect(table.info(method: .get, path: "/u/7/ws").webSocket?.parameters == ["id": "7"])
        #expect(table.info(method: .get, path: "/u/8/ws").webSocket?.parameters == ["id": "8"])
    }

    /// The path a target routes by: up to its query or fragment, whatever comes before them.
    @Test func theRoutedPathEndsAtTheQueryOrFragment() {
        #expect(HTTP1ConnectionHandler.routePath("/a/b?c=/d#e") == "/a/b")
        #expect(HTTP1ConnectionHandler.routePath("/a#frag?x") == "/a")
        #expect(HTTP1ConnectionHandler.routePath("/caf\u{E9}/\u{1F600}?q") == "/caf\u{E9}/\u{1F600}")
        #expect(HTTP1ConnectionHandler.routePath("/plain") == "/plain")
        #expect(HTTP1ConnectionHandler.routePath("http://host:1/x/y?z") == "/x/y")
        #expect(HTTP1ConnectionHandler.method(.GET) == .get && HTTP1ConnectionHandler.method(.PATCH) == .patch)
        #expect(HTTP1ConnectionHandler.method(.RAW(value: "PURGE")).rawValue == "PURGE")
    }

    /// `.pool` handlers leave the connection's event loop; `.eventLoop` ones stay on it.
    @Test func handlersRunOnTheirRoutesExecutor() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        var routes = AgentRoutes()
        routes.get("/pool") { _, _ in "\(loop.inEventLoop)" }
        routes.get("/loop", executor: .eventLoop) { _, _ in "\(loop.inEventLoop)" }
        let responder = AgentResponder(table: try RouteTable(routes: routes.routes))
        for (path, onLoop) in [("/pool", "false"), ("/loop", "true")] {
            let text = await withTaskExecutorPreference(EventLoopTaskExecutor(loop)) {
                let response = await responder.respond(to: Self.request(.get, path), context: AgentRouterTests.context())
                return (try? await AgentRouterTests.text(response)) ?? ""
            }
            #expect(text == onLoop, "\(path)")
        }
    }

    /// A module's routes are mounted at its base path, beside `/healthz` (on the loop).
    @Test func mountsCompileIntoOneTable() async throws {
        struct Module: HTTPModule {
            var name: String { "m" }
            func routes(_ routes: inout AgentRoutes) {
                routes.get(":id", use: RouteTableTests.echo("id"))
                routes.post("upload", body: AgentRoute.streamedBody, use: RouteTableTests.echo("upload"))
                routes.webSocket(":id/watch", check: { _ throws(APIError) in }, handler: { _, _, _ in })
            }
        }
        let table = try RouteTable(mounts: [HTTPMount(Module(), at: "/api/v0/m/")])
        #expect(
            table.routeList.map { "\($0.method) \($0.path)" } == [
                "GET /healthz", "GET /api/v0/m/{id}", "POST /api/v0/m/upload", "GET /api/v0/m/{id}/watch",
            ])
        #expect(table.info(method: .get, path: "/healthz").executor == .eventLoop)
        #expect(table.info(method: .get, path: "/api/v0/m/3/watch").webSocket?.route.path == "/api/v0/m/:id/watch")
        #expect(table.info(method: .post, path: "/api/v0/m/upload").body == AgentRoute.streamedBody, "mounted with its body mode")
        #expect(try await Self.answer(AgentResponder(table: table), .get, "/healthz") == (.ok, #"{"status":"ok"}"# + "\n"))
    }

    @Test func clashingRoutesDoNotBuild() {
        func fails(_ paths: [(HTTPRequest.Method, String)]) -> Bool {
            (try? RouteTable(routes: paths.map { AgentRoute($0.0, $0.1, handler: ClosureResponder(closure: Self.echo(""))) })) == nil
        }
        #expect(!fails([(.get, "/a/:id"), (.post, "/a/:id"), (.get, "/a/list")]))
        #expect(fails([(.get, "/a/:id"), (.get, "/a/{id}")]), "the same method and path twice")
        #expect(fails([(.get, "/a/:id"), (.post, "/a/:name/x")]), "two capture names at one place")
        #expect(fails([(.get, "/files/*/x")]))
        #expect(fails([(.get, "/static/**")]))
        #expect(fails([(.get, "/img/{name}.png")]))
    }
}
