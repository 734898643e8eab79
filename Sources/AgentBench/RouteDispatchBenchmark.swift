import AgentHTTP
import ArgumentParser
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOEmbedded

/// `agent-bench route-dispatch` (also part of `agent-bench http`): ``AgentResponder`` over
/// the agent's ``RouteTable`` (metrics and JSON errors inline) against Hummingbird's `Router`
/// with its `MetricsMiddleware`, over the agent's route shapes; the connection core's lookup
/// (``RouteTable/info(method:path:)``); and what Hummingbird's handler types cost per
/// request beyond HTTPTypes' own. Warm, in one task, metrics not bootstrapped (both record
/// into the no-op handler); handlers on the calling task (`.eventLoop`) so that only the
/// dispatch is measured.
struct RouteDispatchBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "route-dispatch",
        abstract: "Route dispatch: the agent's route table against Hummingbird's router, the core's lookup, the handler types' cost.")

    func run() async throws { await Self.run() }

    static func run() async {
        for (name, ours, theirs, goal) in await measure() {
            report(name, value: Bench.format(ours), baseline: Bench.format(theirs), ratio: ours / theirs, goal: goal, met: true)
        }
    }

    /// The agent's routes by shape: literal and `:id` routes under a few module prefixes.
    static let routes: [(HTTPRequest.Method, String)] = {
        var routes: [(HTTPRequest.Method, String)] = [(.get, "/healthz"), (.get, "/api/v0/metrics")]
        for module in ["processes", "files", "git", "desktop"] {
            let base = "/api/v0/\(module)"
            routes += [(.post, "\(base)/start"), (.get, "\(base)/list"), (.get, "\(base)/:id/output"), (.post, "\(base)/:id/signal")]
        }
        return routes
    }()

    static func measure() async -> [(String, Double, Double, String)] {
        let answer = Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: "{}\n")))
        var ours = AgentRoutes()
        let theirs = Router(context: AgentRequestContext.self)
        theirs.add(middleware: MetricsMiddleware())
        for (method, path) in routes {
            ours.on(method, path, executor: .eventLoop) { _, _ in answer }
            theirs.on(RouterPath(path), method: method) { _, _ in answer }
        }
        let table = try! RouteTable(routes: ours.routes)
        let agent = AgentResponder(table: table)
        let hummingbird = theirs.buildResponder()
        let context = AgentRequestContext(source: .init(channel: EmbeddedChannel(), logger: Logger(label: "bench")))
        let information = "(information: Hummingbird Router + MetricsMiddleware)"
        var lines: [(String, Double, Double, String)] = []
        for (name, path) in [("route dispatch GET /healthz", "/healthz"), ("route dispatch GET /processes/{id}/output", "/api/v0/processes/5abf8495/output")] {
            let request = Request(head: HTTPRequest(method: .get, scheme: nil, authority: nil, path: path), body: .init(buffer: ByteBuffer()))
            let (ours, theirs) = await Bench.alternate(
                count: 50_000, { _ = await agent.respond(to: request, context: context) },
                { _ = try? await hummingbird.respond(to: request, context: context) })
            lines.append((name, ours, theirs, information))
        }
        // The connection core's question, against the whole dispatch of the same path.
        let path: Substring = "/api/v0/processes/5abf8495/output"
        let request = Request(head: HTTPRequest(method: .get, scheme: nil, authority: nil, path: String(path)), body: .init(buffer: ByteBuffer()))
        let (lookup, dispatch) = await Bench.alternate(
            count: 50_000, { _ = table.info(method: .get, path: path) }, { _ = await agent.respond(to: request, context: context) })
        lines.append(("route lookup (info) /processes/{id}/output", lookup, dispatch, "(information: against the dispatch)"))
        // Hummingbird's handler types (Request and Response around HTTPTypes' values, the
        // body as a ResponseBody) against HTTPTypes' values alone: what the handler API
        // costs per request.
        let body = ByteBuffer(string: "{}\n")
        let (wrapped, bare) = await Bench.alternate(
            count: 200_000,
            {
                let head = HTTPRequest(method: .get, scheme: nil, authority: nil, path: String(path))
                let request = Request(head: head, body: .init(buffer: ByteBuffer()))
                let response = Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: body))
                blackHole((request.uri.path.utf8.count, response.body.contentLength))
            },
            {
                let head = HTTPRequest(method: .get, scheme: nil, authority: nil, path: String(path))
                let response = HTTPResponse(status: .ok, headerFields: [.contentType: "application/json"])
                blackHole((head.path?.utf8.count, response.headerFields.count, body.readableBytes))
            })
        lines.append(("handler types (Request + Response)", wrapped, bare, "(information: HTTPTypes' values alone)"))
        return lines
    }

    @inline(never) static func blackHole<T>(_ value: T) { withExtendedLifetime(value) {} }
}
