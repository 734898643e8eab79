import AgentCore
import Prometheus

/// The agent's counters and gauges as ``MetricSample``s (what `UpdateStats.metrics`
/// carries), read from the Prometheus registry's own text: the executable is the one place
/// that knows the backend. Histograms and summaries are left out, as the reference does.
struct PrometheusSnapshot: MetricsSnapshotSource {
    let registry: PrometheusCollectorRegistry
    /// Run before each reading (see ``MetricsRefresh``).
    let refresh: MetricsRefresh

    func samples() -> [MetricSample] {
        refresh.run()
        return Self.parse(String(decoding: registry.emitToBuffer(), as: UTF8.self))
    }

    /// Reads the text exposition format: `# TYPE name counter|gauge` lines set each family's
    /// kind; sample lines are `name{label="value",...} value`. Malformed lines are skipped.
    static func parse(_ text: String) -> [MetricSample] {
        var kinds: [Substring: MetricSample.Kind] = [:]
        var samples: [MetricSample] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.hasPrefix("#") {
                let words = line.split(separator: " ", omittingEmptySubsequences: true)
                if words.count >= 4, words[1] == "TYPE" {
                    switch words[3] {
                    case "counter": kinds[words[2]] = .counter
                    case "gauge": kinds[words[2]] = .gauge
                    default: kinds[words[2]] = nil
                    }
                }
                continue
            }
            guard let sample = parseSample(line), let kind = kinds[Substring(sample.name)] else { continue }
            samples.append(MetricSample(name: sample.name, kind: kind, value: sample.value, labels: sample.labels))
        }
        return samples
    }

    private static func parseSample(_ line: Substring) -> (name: String, value: Double, labels: [(name: String, value: String)])? {
        let chars = Array(line.utf8)
        var i = 0
        while i < chars.count, chars[i] != UInt8(ascii: "{"), chars[i] != UInt8(ascii: " ") { i += 1 }
        let name = String(decoding: chars[0..<i], as: UTF8.self)
        guard !name.isEmpty else { return nil }
        var labels: [(name: String, value: String)] = []
        if i < chars.count, chars[i] == UInt8(ascii: "{") {
            i += 1
            while i < chars.count, chars[i] != UInt8(ascii: "}") {
                let nameStart = i
                while i < chars.count, chars[i] != UInt8(ascii: "=") { i += 1 }
                let labelName = String(decoding: chars[nameStart..<min(i, chars.count)], as: UTF8.self)
                i += 1
                guard i < chars.count, chars[i] == UInt8(ascii: "\"") else { return nil }
                i += 1
                var value: [UInt8] = []
                while i < chars.count, chars[i] != UInt8(ascii: "\"") {
                    if chars[i] == UInt8(ascii: "\\"), i + 1 < chars.count {
                        i += 1
                        value.append(chars[i] == UInt8(ascii: "n") ? UInt8(ascii: "\n") : chars[i])
                    } else {
                        value.append(chars[i])
                    }
                    i += 1
                }
                i += 1
                labels.append((labelName, String(decoding: value, as: UTF8.self)))
                if i < chars.count, chars[i] == UInt8(ascii: ",") { i += 1 }
            }
            i += 1
        }
        let rest = String(decoding: chars[min(i, chars.count)...], as: UTF8.self).split(separator: " ")
        guard let first = rest.first, let value = Double(String(first)) ?? parseSpecial(first) else { return nil }
        return (name, value, labels)
    }

    private static func parseSpecial(_ text: Substring) -> Double? {
        switch text {
        case "+Inf": .infinity
        case "-Inf": -.infinity
        case "NaN": .nan
        default: nil
        }
    }
}
