import AgentHTTP
import Hummingbird
import NIOCore
import Prometheus

/// `GET /metrics`: every swift-metrics value in the Prometheus text format. Only the
/// executable knows the backend; modules use the swift-metrics API.
struct MetricsRoutes: AgentRouteProvider {
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    let registry: PrometheusCollectorRegistry

    func addRoutes(to router: Router<AgentRequestContext>) {
        router.get("/metrics") { _, _ in
            let buffer = ByteBuffer(bytes: registry.emitToBuffer())
            return Response(
                status: .ok,
                headers: [.contentType: Self.contentType, .contentLength: String(buffer.readableBytes)],
                body: .init(byteBuffer: buffer))
        }
    }
}
