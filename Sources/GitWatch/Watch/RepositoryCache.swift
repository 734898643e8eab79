import CoreMetrics
import Dispatch
import Synchronization

/// What the watch sockets of one repository share, so that N sockets watching it cost one
/// poll, not N (a repository too big for inotify is polled by fingerprint; 16 idle sockets
/// kept more than a core busy): the last fingerprint with when it was taken, and the last
/// snapshot with the version of the tree it was taken at (inotify generation, or
/// fingerprint). Computations for one repository run one at a time; a socket that waited
/// for another's takes its fresh result.
///
/// Bounded: at most ``maxEntries`` repositories (the least recently used goes first), one
/// snapshot (≤ 3 MiB of diff) each.
final class RepositoryCache: Sendable {
    /// The tree a snapshot describes.
    struct Version: Hashable, Sendable {
        /// inotify's generation where the whole tree is watched. A cache serves one
        /// ``TreeWatcher``, whose generations are never reused: a snapshot kept from before
        /// the repository was last unwatched cannot match a generation handed out after.
        var generation: UInt64?
        var fingerprint: String?
    }

    static let maxEntries = 256

    private struct EntryState {
        var fingerprint: (value: String, at: ContinuousClock.Instant)?
        var snapshot: (version: Version, value: RepositorySnapshot)?
    }

    private final class Entry: Sendable {
        /// Held while this repository is read (single flight).
        let busy = DispatchSemaphore(value: 1)
        let state = Mutex(EntryState())
    }

    private struct Table {
        var entries: [String: (entry: Entry, used: UInt64)] = [:]
        var clock: UInt64 = 0
    }

    private let table = Mutex(Table())
    /// Reads actually made (not shared), for tests.
    private let reads = Mutex((fingerprints: 0, snapshots: 0))
    var readCounts: (fingerprints: Int, snapshots: Int) { reads.withLock { $0 } }

    private func entry(_ root: String) -> Entry {
        table.withLock { t in
            t.clock += 1
            if let found = t.entries[root] {
                t.entries[root] = (found.entry, t.clock)
                return found.entry
            }
            if t.entries.count >= Self.maxEntries, let oldest = t.entries.min(by: { $0.value.used < $1.value.used })?.key {
                t.entries[oldest] = nil
            }
            let made = Entry()
            t.entries[root] = (made, t.clock)
            return made
        }
    }

    /// The repository's fingerprint, taken within `freshWithin` (by any socket) or now. One
    /// whose read began after this call arrived is always fresh enough: callers that wait
    /// while another reads (a burst of refreshes with `freshWithin` zero) share the next read.
    func fingerprint(root: String, freshWithin: Duration, compute: () throws(GitError) -> String) throws(GitError) -> String {
        let arrived = ContinuousClock.now
        let entry = entry(root)
        entry.busy.wait()
        defer { entry.busy.signal() }
        if let cached = entry.state.withLock({ $0.fingerprint }), cached.at >= arrived || ContinuousClock.now - cached.at <= freshWithin {
            GitWatchMetrics.sharedReads("fingerprint").increment()
            return cached.value
        }
        reads.withLock { $0.fingerprints += 1 }
        // Dated from the read's start: one that began before a caller arrived may predate
        // the change it asks about.
        let started = ContinuousClock.now
        let value = try compute()
        entry.state.withLock { $0.fingerprint = (value, started) }
        return value
    }

    /// The snapshot of the tree at `version`: the one another socket took at the same
    /// version, or a new one. A snapshot without a version is never shared.
    func snapshot(
        root: String, version: Version, compute: () throws(GitError) -> RepositorySnapshot
    ) throws(GitError) -> RepositorySnapshot {
        guard version.generation != nil || version.fingerprint != nil else {
            reads.withLock { $0.snapshots += 1 }
            return try compute()
        }
        let entry = entry(root)
        entry.busy.wait()
        defer { entry.busy.signal() }
        if let cached = entry.state.withLock({ $0.snapshot }), cached.version == version {
            GitWatchMetrics.sharedReads("snapshot").increment()
            return cached.value
        }
        reads.withLock { $0.snapshots += 1 }
        let value = try compute()
        entry.state.withLock { $0.snapshot = (version, value) }
        return value
    }

    /// Drops what is known of `root` (it was removed).
    func forget(_ root: String) {
        table.withLock { t in t.entries[root] = nil }
    }
}
