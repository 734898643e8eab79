import AgentCore

/// The health of the manifest's apps as the agent tracks it: a
/// pure state machine, fed with check outcomes by ``AppHealthReporter`` and asked each tick
/// what to report. No clock, no I/O.
///
/// - Tracked apps: every app whose manifest `health` is not `DISABLED`, starting from that
///   value (the control plane's stored state).
/// - Checked apps: tracked apps with a health-check URL, an interval > 0 and a threshold > 0.
/// - Failure rule, exactly the reference's: while `failures < threshold` a failure only
///   counts (the state is kept); a failure with `failures == threshold` makes the app
///   `UNHEALTHY`. So UNHEALTHY comes with the (threshold + 1)-th consecutive failure. One
///   success makes it `HEALTHY` and resets the counter.
///
/// Memory: one entry per tracked app (the manifest's apps, fixed for the tracker's life).
public struct AppHealthTracker: Sendable, Equatable {
    /// One tracked app's state.
    public struct Entry: Sendable, Equatable {
        public let id: [UInt8]
        public var health: ManifestApp.Health
        /// Consecutive failures counted so far (at most the threshold).
        public var failures: Int32
        public let threshold: Int32
    }

    /// Tracked apps in manifest order.
    public private(set) var entries: [Entry]
    /// The states as last handed out by ``takeChanges()`` (initially the manifest's).
    private var reported: [ManifestApp.Health]

    /// Tracks every app of `apps` whose `health` is not `DISABLED`.
    public init(apps: [ManifestApp]) {
        entries = apps.filter { $0.health != .disabled }.map {
            Entry(id: $0.id, health: $0.health, failures: 0, threshold: $0.healthcheckThreshold)
        }
        reported = entries.map(\.health)
    }

    /// The apps that get checked: tracked, with a URL, interval > 0 and threshold > 0.
    public static func checkedApps(_ apps: [ManifestApp]) -> [ManifestApp] {
        apps.filter {
            $0.health != .disabled && !$0.healthcheckURL.isEmpty && $0.healthcheckInterval > .zero && $0.healthcheckThreshold > 0
        }
    }

    /// Whether any app is tracked (when none is, nothing runs at all).
    public var isEmpty: Bool { entries.isEmpty }

    /// The current state of app `id`; nil when it is not tracked.
    public func health(of id: [UInt8]) -> ManifestApp.Health? {
        entries.first { $0.id == id }?.health
    }

    /// Applies one check outcome of app `id` (ignored when it is not tracked); returns the
    /// app's state afterwards.
    @discardableResult
    public mutating func record(_ id: [UInt8], healthy: Bool) -> ManifestApp.Health? {
        guard let index = entries.firstIndex(where: { $0.id == id }) else { return nil }
        if healthy {
            entries[index].health = .healthy
            entries[index].failures = 0
        } else if entries[index].failures < entries[index].threshold {
            entries[index].failures += 1
        } else {
            entries[index].health = .unhealthy
        }
        return entries[index].health
    }

    /// When any state differs from the last reported copy: every tracked app with its state
    /// (unchanged ones too, as the reference sends them), and the copy is updated at once (so
    /// a report that then fails is not retried; the next change reports again). Nil when
    /// nothing changed.
    public mutating func takeChanges() -> [(id: [UInt8], health: ManifestApp.Health)]? {
        let now = entries.map(\.health)
        guard now != reported else { return nil }
        reported = now
        return entries.map { (id: $0.id, health: $0.health) }
    }
}
