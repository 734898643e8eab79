import CoreMetrics
import Prometheus

/// The agent's swift-metrics backend: Prometheus families with their `# HELP` text (from
/// ``MetricsHelp``), names made Prometheus-safe, and timers in seconds with the unit in the
/// name (`http.server.request.duration` → `http_server_request_duration_seconds`).
/// swift-prometheus's own factory writes no help text.
struct AgentMetricsFactory: MetricsFactory {
    let registry: PrometheusCollectorRegistry

    /// Buckets for every duration histogram: 5 ms to 10 s, as swift-prometheus's default.
    static let durationBuckets: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
        .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
    ]
    static let valueBuckets: [Double] = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000]

    /// `[a-zA-Z0-9_:]` only; anything else becomes `_` (so `http.route` is `http_route`).
    static func sanitize(_ name: String) -> String {
        String(
            String.UnicodeScalarView(
                name.unicodeScalars.map { scalar in
                    switch scalar {
                    case "a"..."z", "A"..."Z", "0"..."9", "_", ":": scalar
                    default: "_"
                    }
                }))
    }

    private func descriptor(_ label: String, unit: String = "") -> MetricNameDescriptor {
        var name = Self.sanitize(label)
        if !unit.isEmpty, !name.hasSuffix("_" + unit) { name += "_" + unit }
        return MetricNameDescriptor(metricName: name, unitName: "", helpText: MetricsHelp.text(for: name))
    }

    private static func labels(_ dimensions: [(String, String)]) -> [(String, String)] {
        dimensions.map { (sanitize($0.0), $0.1) }
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: Self.labels(dimensions))
    }

    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: Self.labels(dimensions))
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        if aggregate {
            return registry.makeValueHistogram(descriptor: descriptor(label), labels: Self.labels(dimensions), buckets: Self.valueBuckets)
        }
        return registry.makeGauge(descriptor: descriptor(label), labels: Self.labels(dimensions))
    }

    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        registry.makeGauge(descriptor: descriptor(label), labels: Self.labels(dimensions))
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        registry.makeDurationHistogram(
            descriptor: descriptor(label, unit: "seconds"), labels: Self.labels(dimensions), buckets: Self.durationBuckets)
    }

    func destroyCounter(_ handler: any CounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    func destroyRecorder(_ handler: any RecorderHandler) {
        if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
        if let histogram = handler as? ValueHistogram { registry.unregisterValueHistogram(histogram) }
    }

    func destroyMeter(_ handler: any MeterHandler) {
        if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
    }

    func destroyTimer(_ handler: any TimerHandler) {
        if let histogram = handler as? DurationHistogram { registry.unregisterDurationHistogram(histogram) }
    }
}
