@testable import AgentHTTP
import AgentTestSupport
import HTTPTypes
import Hummingbird
import Logging
import CoreMetrics
import MetricsTestKit
import NIOCore
import NIOEmbedded
import Synchronization
import Testing

/// The agent's ``RouteTable`` routes ASCII paths as Hummingbird's `Router` does (literal
/// before capture, fallback, parameters, empty components), and ``AgentResponder`` answers
/// errors with the reference's JSON bodies.
struct AgentRouterTests {
    /// Literal and capture routes (`:id` and `{id}`), overlapping on purpose.
    static let routes: [(HTTPRequest.Method, String)] = [
        (.get, "/healthz"), (.get, "/api/v0/processes/list"), (.post, "/api/v0/processes/start"),
        (.get, "/api/v0/processes/:id/output"), (.post, "/api/v0/processes/:id/signal"),
        (.get, "/api/v0/processes/special/output"), (.post, "/files/write-file/:id/cancel"),
        (.get, "/files/{name}/x"), (.delete, "/api/v0/processes/:id/output"), (.get, "/"),
    ]

    static let requests: [(HTTPRequest.Method, String)] = [
        (.get, "/healthz"), (.get, "/healthz/"), (.get, "//healthz"), (.post, "/healthz"), (.head, "/healthz"),
        (.get, "/api/v0/processes/list"), (.get, "/api/v0/processes/abc/output"), (.delete, "/api/v0/processes/abc/output"),
        (.get, "/api/v0/processes/special/output"), (.post, "/api/v0/processes/special/signal"),
        (.get, "/api/v0/processes/a%2Fb/output"), (.get, "/api/v0/processes//output"), (.get, "/api/v0/processes/list/output"),
        (.post, "/files/write-file/7/cancel"), (.get, "/files/any/x"), (.get, "/files/any/y"), (.get, "/files/write-file/x"),
        (.get, "/"), (.get, ""), (.get, "/HEALTHZ"),
        (.get, "/nope"), (.init("PURGE")!, "/healthz"),
    ]

    /// Each handler answers with its route and the parameters it was given.
    static func handler(_ route: String) -> @Sendable (Request, AgentRequestContext) async throws -> String {
        { _, context in
            let parameters = context.parameters.rawParameters.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            return "\(route) \(parameters)"
        }
    }

    static func context() -> AgentRequestContext {
        AgentRequestContext(source: .init(channel: EmbeddedChannel(), logger: Logger(label: "test")))
    }

    static func text(_ response: Response) async throws -> String {
        let collected = Collected()
        try await response.body.write(Collector(into: collected))
        return String(buffer: collected.buffer)
    }

    /// The body's bytes.
    final class Collected: Sendable {
        let bytes = Mutex(ByteBuffer())
        var buffer: ByteBuffer { bytes.withLock { $0 } }
    }

    struct Collector: ResponseBodyWriter {
        let into: Collected
        mutating func write(_ buffer: ByteBuffer) async throws { into.bytes.withLock { _ = $0.writeImmutableBuffer(buffer) } }
        consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }

    @Test func routesAsHummingbirdDoes() async throws {
        // Every route's own text too.
        let requests = Self.requests + Self.routes.map { ($0.0, RouterPath($0.1).description) }
        try await Self.compare(Self.routes, requests)
    }

    /// Random route sets of literals and captures and random ASCII paths over the same
    /// words, with empty components and trailing slashes.
    @Test(.ownThreads) func randomRoutesResolveAsHummingbirdDoes() async throws {
        var random = SplitMix64(seed: 14)
        let words = ["a", "b", "K", ":id", ":id", ":id", ":name"]
        let pathWords = ["a", "b", "K", "7", "", "a%2Fb"]
        var compared = 0
        for _ in 0..<300 {
            var routes: [(HTTPRequest.Method, String)] = []
            var seen = Set<String>()
            for _ in 0..<Int.random(in: 1...12, using: &random) {
                let depth = Int.random(in: 0...3, using: &random)
                let path = "/" + (0..<depth).map { _ in words.randomElement(using: &random)! }.joined(separator: "/")
                let method: HTTPRequest.Method = Bool.random(using: &random) ? .get : .post
                if seen.insert("\(method) \(RouterPath(path).description)").inserted { routes.append((method, path)) }
            }
            var requests: [(HTTPRequest.Method, String)] = []
            for _ in 0..<40 {
                let depth = Int.random(in: 0...4, using: &random)
                let parts = (0..<depth).map { _ in pathWords.randomElement(using: &random)! }
                requests.append((Bool.random(using: &random) ? .get : .post, "/" + parts.joined(separator: "/") + (Bool.random(using: &random) ? "/" : "")))
            }
            // Two capture names at one node: both refuse the set.
            guard (try? Self.table(routes)) != nil else {
                let check = Router(context: AgentRequestContext.self)
                for (method, path) in routes { check.on(RouterPath(path), method: method) { _, _ in "" } }
                #expect((try? check.validate()) == nil, "\(routes)")
                continue
            }
            compared += 1
            try await Self.compare(routes, requests)
        }
        #expect(compared > 100)
    }

    /// The table of `routes`, each answering with ``handler(_:)``.
    static func table(_ routes: [(HTTPRequest.Method, String)], metrics: (any MetricsFactory)? = nil) throws -> RouteTable {
        try RouteTable(
            routes: routes.map { AgentRoute($0.0, $0.1, handler: ClosureResponder(closure: Self.handler("\($0.0) \($0.1)"))) },
            metrics: metrics)
    }

    /// The agent's table and Hummingbird's router answer every request alike (status, and
    /// for a match the route and its parameters), except that where Hummingbird answers 404
    /// for a path it has under other methods only, the agent answers 405 naming them.
    static func compare(_ routes: [(HTTPRequest.Method, String)], _ requests: [(HTTPRequest.Method, String)]) async throws {
        let agent = AgentResponder(table: try Self.table(routes))
        let theirs = Router(context: AgentRequestContext.self)
        for (method, path) in routes {
            theirs.on(RouterPath(path), method: method, use: Self.handler("\(method) \(path)"))
        }
        let hummingbird = theirs.buildResponder()
        for (method, path) in requests {
            let request = Request(head: HTTPRequest(method: method, scheme: nil, authority: nil, path: path), body: .init(buffer: ByteBuffer()))
            let answer = await agent.respond(to: request, context: Self.context())
            let expected = try await hummingbird.respond(to: request, context: Self.context())
            if answer.status == .methodNotAllowed {
                #expect(expected.status == .notFound, "\(method) \(path) over \(routes)")
                let allowed = try #require(answer.headers[.allow]).split(separator: ", ").map { HTTPRequest.Method(String($0))! }
                #expect(!allowed.isEmpty && !allowed.contains(method), "\(method) \(path) over \(routes)")
                // Each allowed method is answered.
                for other in allowed {
                    let again = Request(head: HTTPRequest(method: other, scheme: nil, authority: nil, path: path), body: .init(buffer: ByteBuffer()))
                    #expect(await agent.respond(to: again, context: Self.context()).status == .ok, "\(other) \(path) over \(routes)")
                }
            } else {
                #expect(answer.status == expected.status, "\(method) \(path) over \(routes)")
            }
            if expected.status == .ok {
                #expect(try await Self.text(answer) == (try await Self.text(expected)), "\(method) \(path) over \(routes)")
            }
        }
    }

    /// `routes` as a responder (handlers off the loop, the default).
    static func responder(_ routes: AgentRoutes, metrics: (any MetricsFactory)? = nil) throws -> AgentResponder {
        AgentResponder(table: try RouteTable(routes: routes.routes, metrics: metrics))
    }

    @Test func errorsAnswerWithJSONBodies() async throws {
        struct Unexpected: Error {}
        /// An HTTPResponseError of another kind: not the agent's, so a plain 500.
        struct Teapot: HTTPResponseError {
            var status: HTTPResponse.Status { .init(code: 418) }
            func response(from request: Request, context: some RequestContext) throws -> Response { Response(status: status) }
        }
        var router = AgentRoutes()
        router.get("/api") { _, _ -> String in throw APIError(.conflict, "Taken.", detail: "d") }
        router.get("/hb") { _, _ -> String in throw HTTPError(.badRequest, message: "bad thing") }
        router.get("/big") { _, _ -> String in throw NIOTooManyBytesError(maxBytes: 1) }
        router.get("/boom") { _, _ -> String in throw Unexpected() }
        router.get("/cancel") { _, _ -> String in throw CancellationError() }
        router.get("/other") { _, _ -> String in throw Teapot() }
        let responder = try Self.responder(router)
        let cases: [(String, HTTPResponse.Status, String)] = [
            ("/api", .conflict, #"{"detail":"d","message":"Taken."}"#),
            ("/hb", .badRequest, #"{"message":"bad thing"}"#),
            ("/big", .contentTooLarge, #"{"detail":"The limit is 1048576 bytes.","message":"Request body too large."}"#),
            ("/boom", .internalServerError, #"{"message":"Internal error."}"#),
            ("/cancel", .serviceUnavailable, #"{"message":"Request cancelled."}"#),
            ("/missing", .notFound, #"{"detail":"GET /missing","message":"Route not found."}"#),
            ("/other", .internalServerError, #"{"message":"Internal error."}"#),
            // A known path with another method is 405 (with Allow, below).
            ("POST /api", .methodNotAllowed, #"{"detail":"POST /api; allowed: GET","message":"Method not allowed."}"#),
            ("POST /nowhere", .notFound, #"{"detail":"POST /nowhere","message":"Route not found."}"#),
        ]
        for (target, status, body) in cases {
            let (method, path): (HTTPRequest.Method, String) = target.hasPrefix("POST ") ? (.post, String(target.dropFirst(5))) : (.get, target)
            let request = Request(head: HTTPRequest(method: method, scheme: nil, authority: nil, path: path), body: .init(buffer: ByteBuffer()))
            let response = await responder.respond(to: request, context: Self.context())
            #expect(response.status == status, "\(path)")
            #expect(response.headers[.contentType] == JSONResponse.contentType)
            #expect(try await Self.text(response) == body + "\n", "\(path)")
            #expect(response.headers[.allow] == (status == .methodNotAllowed ? "GET" : nil), "\(target)")
        }
        // Every method a path has is allowed, in the order added.
        router.post("/api") { _, _ in "posted" }
        let both = try Self.responder(router)
        let put = await both.respond(
            to: Request(head: HTTPRequest(method: .put, scheme: nil, authority: nil, path: "/api"), body: .init(buffer: ByteBuffer())),
            context: Self.context())
        #expect(put.status == .methodNotAllowed && put.headers[.allow] == "GET, POST")
    }

    /// A connection's requests share one starting context: nothing one request's route set
    /// (parameters, chat, endpoint path) reaches the next.
    @Test func aSharedContextCarriesNothingOver() async throws {
        var router = AgentRoutes()
        router.get("/p/:id") { _, context in "\(context.parameters.rawParameters) \(context.chat.map { "\($0)" } ?? "-") \(context.endpointPath ?? "-")" }
        router.get("/plain") { _, context in "\(context.parameters.rawParameters) \(context.chat.map { "\($0)" } ?? "-") \(context.endpointPath ?? "-")" }
        var chats = AgentRoutes()
        chats.add(middleware: ChatIdentityMiddleware())
        chats.get("/chat") { _, context in context.chat.map { "\($0)" } ?? "-" }
        router.add(chats)
        let responder = try Self.responder(router)
        let shared = Self.context()
        func answer(_ path: String, _ headers: HTTPFields = [:]) async throws -> String {
            let head = HTTPRequest(method: .get, scheme: nil, authority: nil, path: path, headerFields: headers)
            return try await Self.text(await responder.respond(to: Request(head: head, body: .init(buffer: ByteBuffer())), context: shared))
        }
        #expect(try await answer("/p/7") == #"["id": "7"] - /p/{id}"#)
        #expect(try await answer("/chat", [.init("Coder-Chat-Id")!: "0f0e0d0c-0b0a-4908-8706-050403020100"]) != "-")
        #expect(try await answer("/plain") == "[:] - /plain")
        _ = try await answer("/nowhere")
        #expect(shared.endpointPath == "NotFound")
        #expect(shared.parameters.isEmpty && shared.chat == nil)
    }

    /// `http.server.request.duration`: the route's pattern, the method (`_OTHER` beyond the
    /// nine standard ones), the status answered (a thrown error's too, 405 for a method the
    /// route does not answer), and `NotFound` for a path no route has.
    @Test func requestDurationsCarryRouteMethodAndStatus() async throws {
        let metrics = TestMetrics()
        var router = AgentRoutes()
        router.get("/p/:id") { _, _ in "ok" }
        router.get("/err") { _, _ -> String in throw APIError(.conflict, "Taken.") }
        let responder = try Self.responder(router, metrics: metrics)
        for (method, path) in [(HTTPRequest.Method.get, "/p/1"), (.get, "/p/2"), (.post, "/p/1"), (.get, "/nope"), (.init("PURGE")!, "/p/1"), (.get, "/err")] {
            _ = await responder.respond(
                to: Request(head: HTTPRequest(method: method, scheme: nil, authority: nil, path: path), body: .init(buffer: ByteBuffer())),
                context: Self.context())
        }
        func count(_ route: String, _ method: String, _ status: String) throws -> Int {
            try metrics.expectTimer(
                "http.server.request.duration",
                [("http.route", route), ("http.request.method", method), ("http.response.status_code", status)]
            ).values.count
        }
        #expect(try count("/p/{id}", "GET", "200") == 2)
        // A method the route does not answer is 405 under the route's label.
        #expect(try count("/p/{id}", "POST", "405") == 1)
        #expect(try count("NotFound", "GET", "404") == 1)
        #expect(try count("/p/{id}", "_OTHER", "405") == 1)
        #expect(try count("/err", "GET", "409") == 1)
        #expect(metrics.timers.count == 5)
    }

    /// A module's middleware wraps the routes added after it; the table's wraps every route
    /// and the not-found answer.
    @Test func middlewareWrapsLaterRoutes() async throws {
        struct Tag: RouterMiddleware {
            typealias Context = AgentRequestContext
            let name: String
            func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
                do {
                    var response = try await next(request, context)
                    response.headers[.init("X-Tag")!] = (response.headers[.init("X-Tag")!] ?? "") + name
                    return response
                } catch {
                    throw APIError(.notFound, "tagged \(name)")
                }
            }
        }
        var router = AgentRoutes()
        router.get("/before") { _, _ in "b" }
        router.add(middleware: Tag(name: "outer"))
        router.add(middleware: Tag(name: "inner"))
        router.get("/after") { _, _ in "a" }
        // The table's own middleware wraps every route and the not-found answer.
        var server = AgentRoutes()
        server.add(router)
        let responder = AgentResponder(table: try RouteTable(routes: server.routes, middleware: [Tag(name: "server")]))
        func answer(_ path: String) async throws -> Response {
            await responder.respond(
                to: Request(head: HTTPRequest(method: .get, scheme: nil, authority: nil, path: path), body: .init(buffer: ByteBuffer())),
                context: Self.context())
        }
        #expect(try await answer("/before").headers[.init("X-Tag")!] == "server")
        #expect(try await answer("/after").headers[.init("X-Tag")!] == "innerouterserver")
        #expect(try await Self.text(try await answer("/nowhere")) == #"{"message":"tagged server"}"# + "\n")
    }
}

/// A seeded generator (SplitMix64), so that a failing random case can be run again.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
