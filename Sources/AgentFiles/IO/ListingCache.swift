import AgentCore
import AgentHTTP
import HTTPTypes
import Metrics
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Directory listings kept between the pages of `list-directory`, so that a page after the
/// first costs what it returns instead of a whole read (and sort) of the directory. A kept
/// listing is the directory as it was when its first page was read; its pages concatenate
/// to exactly that listing, whatever is added or removed meanwhile.
///
/// Bounded in count, size and age: at most ``maxListings`` listings and ``maxEntries``
/// entries kept in all (the least recently used listing is dropped first to make room; a
/// directory larger than that is not kept, and each of its pages reads it again), each
/// dropped ``idleLifetime`` after its last page and as soon as its last page is served.
final class ListingCache: Sendable {
    /// Listings kept at once.
    static let maxListings = 8
    /// Entries kept in all listings together (a name and a flag each, ~24–80 bytes: at most
    /// some 20 MiB).
    static let maxEntries = 262_144
    /// How long a listing is kept after its last page was served.
    static let idleLifetime = Duration.seconds(60)

    /// One entry of a listing, in the listing's order.
    struct Item: Sendable, Equatable {
        var name: String
        var isDir: Bool
    }

    private struct Kept {
        var directory: String
        var items: [Item]
        var lastUsed: ContinuousClock.Instant
    }

    private struct State {
        var kept: [String: Kept] = [:]
        var entries = 0
    }

    private let state = Mutex(State())
    private let limits: (listings: Int, entries: Int, lifetime: Duration)
    private let now: @Sendable () -> ContinuousClock.Instant
    /// Whole reads of a directory by list-directory (also counted in the metric), for tests.
    private let readCount = Atomic<Int>(0)

    /// - Parameter now: the clock that ages listings (tests inject one).
    init(
        maxListings: Int = ListingCache.maxListings, maxEntries: Int = ListingCache.maxEntries,
        idleLifetime: Duration = ListingCache.idleLifetime, now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) {
        limits = (maxListings, maxEntries, idleLifetime)
        self.now = now
    }

    /// How many times a directory was read whole for list-directory.
    var reads: Int { readCount.load(ordering: .relaxed) }

    /// The listings kept now (after dropping the expired ones).
    var keptCount: Int {
        let now = now()
        return state.withLock { state in
            dropExpired(&state, now: now)
            return state.kept.count
        }
    }

    /// The kept listing `id` of `directory`, marked as used now; nil when it is unknown,
    /// expired, dropped for room, or of another directory.
    func lookup(_ id: String, directory: String) -> [Item]? {
        let now = now()
        return state.withLock { state -> [Item]? in
            dropExpired(&state, now: now)
            guard var kept = state.kept[id], kept.directory == directory else { return nil }
            kept.lastUsed = now
            state.kept[id] = kept
            return kept.items
        }
    }

    /// Keeps `items` as a listing of `directory` and returns its id, dropping the least
    /// recently used listings to make room; nil when the listing alone is over the bound.
    func keep(_ items: [Item], directory: String) -> String? {
        guard items.count <= limits.entries, limits.listings > 0 else { return nil }
        let now = now()
        var generator = SystemRandomNumberGenerator()
        let id = String(generator.next() as UInt64, radix: 16) + String(generator.next() as UInt64, radix: 16)
        state.withLock { state in
            dropExpired(&state, now: now)
            while state.kept.count >= limits.listings || state.entries + items.count > limits.entries,
                let oldest = state.kept.min(by: { $0.value.lastUsed < $1.value.lastUsed })?.key
            {
                remove(oldest, from: &state)
            }
            state.kept[id] = Kept(directory: directory, items: items, lastUsed: now)
            state.entries += items.count
            FilesMetrics.keptListingEntries.record(state.entries)
        }
        return id
    }

    /// Drops listing `id` (its last page was served).
    func drop(_ id: String) {
        state.withLock { state in remove(id, from: &state) }
    }

    private func remove(_ id: String, from state: inout State) {
        guard let kept = state.kept.removeValue(forKey: id) else { return }
        state.entries -= kept.items.count
        FilesMetrics.keptListingEntries.record(state.entries)
    }

    private func dropExpired(_ state: inout State, now: ContinuousClock.Instant) {
        for (id, kept) in state.kept where now - kept.lastUsed >= limits.lifetime { remove(id, from: &state) }
    }

    /// Reads `directory` whole: directories first, then names in byte order; hidden entries
    /// included; `isDir` from lstat (a link to a directory is not one).
    func read(_ directory: String) throws -> [Item] {
        readCount.add(1, ordering: .relaxed)
        FilesMetrics.directoryReads.increment()
        var info = stat()
        guard FS.stat(directory, &info) == 0 else { throw FileSystemError.last("open", directory).apiError }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw APIError(.internalServerError, "open \(directory): not a directory") }
        guard let handle = FS.opendir(directory) else { throw FileSystemError.last("open", directory).apiError }
        defer { closedir(handle) }
        var keyed: [(key: [UInt8], item: Item)] = []
        while let entry = readdir(handle) {
            let raw = withUnsafeBytes(of: entry.pointee.d_name) { raw in Array(raw.prefix { $0 != 0 }) }
            if raw == [UInt8(ascii: ".")] || raw == [UInt8(ascii: "."), UInt8(ascii: ".")] { continue }
            // Names that are not UTF-8 are kept byte for byte (FilePathText).
            let name = FilePathText.decode(raw)
            let full = directory == "/" ? "/" + name : directory + "/" + name
            var entryInfo = stat()
            let isDir = FS.lstat(full, &entryInfo) == 0 && entryInfo.st_mode & S_IFMT == S_IFDIR
            keyed.append((raw, Item(name: name, isDir: isDir)))
        }
        keyed.sort { a, b in
            if a.item.isDir != b.item.isDir { return a.item.isDir }
            return a.key.lexicographicallyPrecedes(b.key)
        }
        return keyed.map(\.item)
    }
}
