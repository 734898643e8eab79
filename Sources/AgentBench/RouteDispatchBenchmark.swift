import AgentHTTP
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOEmbedded

/// `agent-bench http`'s route dispatch line: ``AgentResponder`` (Hummingbird's route trie,
/// metrics and JSON errors inline, `RouteMatcher`) against Hummingbird's `Router` with
/// its `MetricsMiddleware`, over the agent's route shapes; warm, in one task, metrics not
/// bootstrapped (both record into the no-op handler).
enum RouteDispatchBenchmark {
    static func run() async {
        for (name, ours, theirs) in await measure() {
            report(name, value: Bench.format(ours), baseline: Bench.format(theirs), ratio: ours / theirs,
                   goal: "(information: Hummingbird Router + MetricsMiddleware)", met: true)
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

    static func measure() async -> [(String, Double, Double)] {
        let answer = Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: "{}\n")))
        let ours = AgentRouter()
        let theirs = Router(context: AgentRequestContext.self)
        theirs.add(middleware: MetricsMiddleware())
        for (method, path) in routes {
            ours.on(RouterPath(path), method: method) { _, _ in answer }
            theirs.on(RouterPath(path), method: method) { _, _ in answer }
        }
        let agent = ours.buildResponder()
        let hummingbird = theirs.buildResponder()
        let context = AgentRequestContext(source: .init(channel: EmbeddedChannel(), logger: Logger(label: "bench")))
        var lines: [(String, Double, Double)] = []
        for (name, path) in [("route dispatch GET /healthz", "/healthz"), ("route dispatch GET /processes/{id}/output", "/api/v0/processes/5abf8495/output")] {
            let request = Request(head: HTTPRequest(method: .get, scheme: nil, authority: nil, path: path), body: .init(buffer: ByteBuffer()))
            let (ours, theirs) = await Bench.alternate(
                count: 50_000, { _ = await agent.respond(to: request, context: context) },
                { _ = try? await hummingbird.respond(to: request, context: context) })
            lines.append((name, ours, theirs))
        }
        return lines
    }
}
