import CoreMetrics
import Metrics

/// The file API's counters (swift-metrics; the executable serves them as Prometheus).
enum FilesMetrics {
    /// Directories read whole by list-directory (a first page, an unpaged listing, or a page
    /// whose kept listing was gone); a later page of a kept listing reads nothing.
    static let directoryReads = Counter(label: "agent_files_list_directory_reads_total")
    /// Entries held in the listings kept for paging (bounded by ``ListingCache/maxEntries``).
    static let keptListingEntries = Gauge(label: "agent_files_kept_listing_entries")
}
