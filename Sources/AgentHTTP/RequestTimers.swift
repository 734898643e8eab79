import CoreMetrics
import HTTPTypes
import Metrics
import Synchronization

/// One route's `http.server.request.duration` timers (labels: route, method, status), each
/// made once: the metrics factory's own lookup takes a lock and builds a label string each
/// time. Bounded by the nine standard methods (any other counts as `_OTHER`: a client picks
/// the method) plus one, times the statuses the route answers.
///
/// The duration runs until the handler returns, not until the body is written: Hummingbird's
/// `MetricsMiddleware` wraps each body in a closure, which costs the single-write fast path
/// (head, body and end in one syscall) on every response. It is time to the response head.
final class RequestTimers: Sendable {
    let route: String
    /// Where the timers are made (nil: the bootstrapped metrics system, looked up when a
    /// timer is first needed).
    private let factory: (any MetricsFactory)?
    private let timers = Mutex<[Int: Timer]>([:])
    private static let standard: [HTTPRequest.Method] = [.get, .head, .post, .put, .delete, .connect, .options, .trace, .patch]

    init(route: String, factory: (any MetricsFactory)? = nil) {
        self.route = route
        self.factory = factory
    }

    /// Records one request's duration.
    func record(method: HTTPRequest.Method, status: HTTPResponse.Status, nanoseconds: UInt64) {
        timer(method: method, status: status).recordNanoseconds(Int64(truncatingIfNeeded: nanoseconds))
    }

    func timer(method: HTTPRequest.Method, status: HTTPResponse.Status) -> Timer {
        let slot = Self.standard.firstIndex(of: method) ?? Self.standard.count
        let key = slot * 1000 + status.code
        return timers.withLock { timers in
            if let timer = timers[key] { return timer }
            let label = slot < Self.standard.count ? method.rawValue : "_OTHER"
            let timer = Timer(
                label: "http.server.request.duration",
                dimensions: [("http.route", route), ("http.request.method", label), ("http.response.status_code", String(status.code))],
                preferredDisplayUnit: .seconds, factory: factory ?? MetricsSystem.factory)
            timers[key] = timer
            return timer
        }
    }
}
