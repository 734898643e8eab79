import AgentSystem
import Synchronization

/// Contexts shared by every connection made with the same configuration. Making one reads
/// its files (for the system's trust, about 200 KiB of PEM parsed into some 140
/// certificates, a few milliseconds), so a dialer that reconnects must not make one per
/// dial; Go's agent, too, loads the system's pool once. A context is made on a thread of
/// its own, not on the caller's (a task's cooperative thread), and one that fails to be
/// made is not kept (the next dial tries again).
///
/// Bounded: the last ``maxEntries`` configurations. A kept configuration's files are not
/// read again: a trust store changed on disk is seen when the agent restarts, as in Go.
public final class TLSContextCache: Sendable {
    /// The agent's one cache.
    public static let shared = TLSContextCache()
    /// Configurations kept at most; the oldest goes first.
    public static let maxEntries = 8
    /// Where contexts are made: one thread, started on the first make.
    private static let pool = BlockingPool(name: "tls-context", threads: 1, maxQueued: 64)

    private struct Entry {
        let configuration: TLSConfiguration
        let context: TLSContext
    }

    /// Oldest first; at most ``maxEntries``.
    private let entries = Mutex<[Entry]>([])

    public init() {}

    /// The context for `configuration`: the kept one, else one made now.
    public func context(for configuration: TLSConfiguration) async throws -> TLSContext {
        if let kept = entries.withLock({ $0.first { $0.configuration == configuration }?.context }) { return kept }
        let made = try await Self.pool.run { _ in try TLSContext(configuration: configuration) }
        return entries.withLock { entries in
            // Two first dials at once: the first one kept is everyone's.
            if let kept = entries.first(where: { $0.configuration == configuration }) { return kept.context }
            if entries.count >= Self.maxEntries { entries.removeFirst() }
            entries.append(Entry(configuration: configuration, context: made))
            return made
        }
    }

    /// The configurations kept now (tests).
    var count: Int { entries.withLock { $0.count } }
}
