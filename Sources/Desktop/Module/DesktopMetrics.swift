import CoreMetrics
import Metrics

/// The desktop's counters (swift-metrics; served as Prometheus by the executable).
enum DesktopMetrics {
    /// Desktops started.
    static let starts = Counter(label: "agent_desktop_starts_total")
    /// Desktops found dead on use (and started again).
    static let crashes = Counter(label: "agent_desktop_crashes_total")
    /// Reads of the X server (screenshots, `cursor_position`) that ran past their deadline
    /// (``XScreenReader/timeout`` with no answer, or a reply arriving below
    /// ``XScreenReader/minimumRate``) and failed (never answered with an older image).
    static let xTimeouts = Counter(label: "agent_desktop_x_timeouts_total")
    /// Open VNC viewers (WebSocket bridges).
    static let viewers = Gauge(label: "agent_desktop_viewers")
    /// Bytes carried by the bridge, by direction (`to_viewer`, `to_desktop`).
    static func bridged(_ direction: String) -> Counter {
        Counter(label: "agent_desktop_bridge_bytes_total", dimensions: [("direction", direction)])
    }
    /// Actions run, by action and outcome (`ok`, `client_error`, `failed`).
    static func action(_ name: String, _ outcome: String) -> Counter {
        Counter(label: "agent_desktop_actions_total", dimensions: [("action", name), ("outcome", outcome)])
    }
}
