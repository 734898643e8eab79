import Metrics

/// What the speed test counts (HELP texts in the executable's catalog).
struct SpeedtestMetrics: Sendable {
    let downloads = Counter(label: "agent_speedtest_tests_total", dimensions: [("direction", "download")])
    let uploads = Counter(label: "agent_speedtest_tests_total", dimensions: [("direction", "upload")])
    let downloaded = Counter(label: "agent_speedtest_bytes_total", dimensions: [("direction", "download")])
    let uploaded = Counter(label: "agent_speedtest_bytes_total", dimensions: [("direction", "upload")])
    let refused = Counter(label: "agent_speedtest_refused_total")
}
