import AgentCore
import Synchronization

/// Resolves STUN nodes' host names (``STUNTargets/hostNames``) with the system's resolver,
/// off the engine's loop, and keeps the answers for ``ttl``: a report every 20–26 s does not
/// ask DNS each time, and a name that moves is followed within the TTL.
///
/// Bounded: one lookup thread with at most ``maxQueued`` batches waiting, a batch resolves
/// at most ``STUNServer/maxServers`` names, and the cache holds only the names of the
/// latest batch (at most as many).
final class STUNResolver: Sendable {
    /// The first address of each family a name resolved to, as text.
    struct Addresses: Equatable, Sendable {
        var ipv4: String?
        var ipv6: String?
        var isEmpty: Bool { ipv4 == nil && ipv6 == nil }
    }

    /// How long an answer is used before the name is looked up again.
    static let ttl: Duration = .seconds(600)
    static let maxQueued = 2

    private struct Entry {
        var addresses: Addresses
        var resolvedAt: ContinuousClock.Instant
        func isStale(at now: ContinuousClock.Instant) -> Bool { now - resolvedAt >= STUNResolver.ttl }
    }

    private let lookup: @Sendable (String) -> Addresses
    private let cache = Mutex<[String: Entry]>([:])
    private let pool = BlockingPool(name: "stun-dns", threads: 1, maxQueued: maxQueued)
    /// Names looked up so far (for tests: a cached name is not looked up again).
    let lookups = Atomic<Int>(0)

    init(lookup: @escaping @Sendable (String) -> Addresses = STUNResolver.systemLookup) {
        self.lookup = lookup
    }

    /// What the cache holds for `names` now, and whether any of them is missing or older
    /// than the TTL.
    func cached(_ names: [String], now: ContinuousClock.Instant = .now) -> (addresses: [String: Addresses], stale: Bool) {
        cache.withLock { cache in
            var found: [String: Addresses] = [:]
            var stale = false
            for name in names {
                if let entry = cache[name] {
                    found[name] = entry.addresses
                    if entry.isStale(at: now) { stale = true }
                } else {
                    stale = true
                }
            }
            return (found, stale)
        }
    }

    /// Looks `names` up (those missing or stale; at most ``STUNServer/maxServers``) and
    /// returns what the cache then holds for them. A name that resolves to nothing keeps
    /// its last answer, if any, and is asked again next time. Nil when the lookup queue is
    /// full or the task was cancelled.
    func resolve(_ names: [String]) async -> [String: Addresses]? {
        let names = Array(names.prefix(STUNServer.maxServers))
        let asked = ContinuousClock.now
        let due = cache.withLock { cache in names.filter { name in cache[name]?.isStale(at: asked) ?? true } }
        if !due.isEmpty {
            guard
                let answers = try? await pool.run({ [self] _ in
                    due.map { name -> (String, Addresses) in
                        lookups.add(1, ordering: .relaxed)
                        return (name, lookup(name))
                    }
                })
            else { return nil }
            let now = ContinuousClock.now
            cache.withLock { cache in
                for (name, addresses) in answers where !addresses.isEmpty {
                    cache[name] = Entry(addresses: addresses, resolvedAt: now)
                }
            }
        }
        // Only the names asked for stay (bounded by the batch).
        let wanted = Set(names)
        cache.withLock { cache in
            for name in Array(cache.keys) where !wanted.contains(name) { cache[name] = nil }
        }
        return cached(names).addresses
    }

    /// The system's resolver for UDP: the first address of each family.
    @Sendable static func systemLookup(_ name: String) -> Addresses {
        let found = HostLookup.firstAddresses(of: name, datagram: true)
        return Addresses(ipv4: found.ipv4, ipv6: found.ipv6)
    }
}
