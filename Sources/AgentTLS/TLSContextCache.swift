import AgentSystem
import Synchronization

/// Contexts shared by every connection made with the same configuration. Making one reads
/// its files (for the system's trust, the bundle of about 140 certificates, a few
/// milliseconds), so a dialer that reconnects must not make one per dial; Go's agent, too,
/// loads the system's pool once. A context is made once however many dials ask for it at
/// the same time, on a thread of its own rather than the caller's (a task's cooperative
/// thread); one that could not be made is not kept (the next dial tries again).
///
/// Bounded: the ``maxEntries`` configurations used last. A kept configuration's bundle is not
/// read again (OpenSSL's hashed directory, `SSL_CERT_DIR`, is searched as certificates are
/// needed): a certificate added to the bundle is trusted after a restart, as in Go.
public final class TLSContextCache: Sendable {
    /// The agent's one cache.
    public static let shared = TLSContextCache()
    /// Configurations kept at most; the one used longest ago goes first.
    public static let maxEntries = 8
    /// Where contexts are made: one thread, started on the first make. A make that hangs (a
    /// trust file on a hung mount) holds back the others' first makes, as it held the dial
    /// that made it inline before.
    private static let pool = BlockingPool(name: "tls-context", threads: 1, maxQueued: 64)

    private struct Entry {
        let configuration: TLSConfiguration
        /// The make, shared by every dial that asked while it ran, and its result after.
        let making: Task<TLSContext, any Error>
    }

    /// Least recently used first; at most ``maxEntries``.
    private let entries = Mutex<[Entry]>([])

    public init() {}

    /// The context for `configuration`: the kept one, else one made now.
    public func context(for configuration: TLSConfiguration) async throws -> TLSContext {
        let making = entries.withLock { entries -> Task<TLSContext, any Error> in
            if let index = entries.firstIndex(where: { $0.configuration == configuration }) {
                let entry = entries.remove(at: index)
                entries.append(entry)
                return entry.making
            }
            let making = Task { try await Self.pool.run { _ in try TLSContext(configuration: configuration) } }
            if entries.count >= Self.maxEntries { entries.removeFirst() }
            entries.append(Entry(configuration: configuration, making: making))
            return making
        }
        do {
            return try await making.value
        } catch {
            // Not kept: unless a later make has taken its place already.
            entries.withLock { entries in entries.removeAll { $0.making == making } }
            throw error
        }
    }

    /// The configurations kept now (tests).
    var count: Int { entries.withLock { $0.count } }
}
