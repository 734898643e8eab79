import CoreMetrics
import HTTPTypes
import Hummingbird
import Metrics
import NIOCore
import Synchronization

/// Records every routed request in the `http.server.request.duration` histogram (labels:
/// route, method, status), as Hummingbird's `MetricsMiddleware` does, but when the
/// handler returns rather than after the body is written: Hummingbird's middleware wraps
/// each body in a closure, which costs the single-write fast path (head, body and end in
/// one syscall) on every response. The duration is therefore time to the response head.
public struct RequestMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let cache = RequestMetricsCache()

    public init() {}

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = NIODeadline.now().uptimeNanoseconds
        do {
            let response = try await next(request, context)
            cache.timer(route: context.endpointPath ?? "Unknown", method: request.method, status: response.status)
                .recordNanoseconds(NIODeadline.now().uptimeNanoseconds - start)
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status ?? .internalServerError
            cache.timer(route: context.endpointPath ?? "NotFound", method: request.method, status: status)
                .recordNanoseconds(NIODeadline.now().uptimeNanoseconds - start)
            throw error
        }
    }
}

/// One timer per (route, method, status), made once: the metrics factory's own lookup
/// takes a lock and builds a label string each time. Bounded by the routes the router
/// knows (unknown paths all count as "NotFound") times the nine standard methods (any
/// other counts as "_OTHER": a client picks the method) times statuses.
final class RequestMetricsCache: Sendable {
    struct Key: Hashable {
        let route: String
        let method: HTTPRequest.Method
        let status: Int
    }

    private let timers = Mutex<[Key: Timer]>([:])
    private static let standard: Set<HTTPRequest.Method> = [.get, .head, .post, .put, .delete, .connect, .options, .trace, .patch]

    func timer(route: String, method: HTTPRequest.Method, status: HTTPResponse.Status) -> Timer {
        let method = Self.standard.contains(method) ? method : HTTPRequest.Method("_OTHER")!
        let key = Key(route: route, method: method, status: status.code)
        return timers.withLock { timers in
            if let timer = timers[key] { return timer }
            let timer = Timer(
                label: "http.server.request.duration",
                dimensions: [
                    ("http.route", route), ("http.request.method", method.rawValue), ("http.response.status_code", String(status.code)),
                ],
                preferredDisplayUnit: .seconds)
            timers[key] = timer
            return timer
        }
    }
}
