import AgentCore
import AgentHTTP
import Hummingbird
import NIOCore
import Prometheus

/// `GET /metrics` (and `/debug/prometheus`, where the reference's support bundle reads it):
/// every swift-metrics value in the Prometheus text format. Only the executable knows the
/// backend; modules use the swift-metrics API.
struct MetricsModule: HTTPModule {
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    let registry: PrometheusCollectorRegistry
    /// Run before each scrape (the agent's own `process_*` values, the tunnel's counters).
    let refresh: MetricsRefresh
    /// The route's path below the mount point.
    var path = "metrics"

    var name: String { "metrics" }

    /// A scrape reads `/proc` and formats every metric: on the pool.
    func routes(_ routes: inout AgentRoutes) {
        routes.get(path) { [registry, refresh] _, _ in
            refresh.run()
            let buffer = ByteBuffer(bytes: registry.emitToBuffer())
            return Response(
                status: .ok,
                headers: [.contentType: Self.contentType, .contentLength: String(buffer.readableBytes)],
                body: .init(byteBuffer: buffer))
        }
    }
}
