import CoreMetrics
import Metrics

/// The git watcher's counters (swift-metrics; the executable serves them as Prometheus).
enum GitWatchMetrics {
    /// Directories watched with inotify, for all repositories.
    static let watches = Gauge(label: "agent_git_watch_inotify_watches")
    /// Repositories checked by polling (their directories did not fit the watch budget, or
    /// inotify is unavailable).
    static let polledRepositories = Gauge(label: "agent_git_watch_polled_repositories")
    /// Times inotify's queue overflowed (every repository is then rescanned and rewatched).
    static let overflows = Counter(label: "agent_git_watch_inotify_overflows_total")
    /// Scans abandoned because a working-tree file shrank under libgit2's mapping (SIGBUS
    /// caught; the scan is retried).
    static let fileChangedDuringScan = Counter(label: "agent_git_watch_file_changed_during_scan_total")
    /// Fingerprints and snapshots one socket took from another's read of the same tree.
    static func sharedReads(_ kind: String) -> Counter {
        Counter(label: "agent_git_watch_shared_reads_total", dimensions: [("kind", kind)])
    }
    /// Repository checks by outcome: `unchanged_event` (no event since the last scan: free),
    /// `unchanged_fingerprint` (polled, fingerprint equal), `changed`, `same` (scanned, diff
    /// equal to the one sent), `removed`, `failed`, `skipped` (the git pool was full; read at
    /// the next scan).
    static func check(_ outcome: String) -> Counter {
        Counter(label: "agent_git_watch_checks_total", dimensions: [("outcome", outcome)])
    }
}
