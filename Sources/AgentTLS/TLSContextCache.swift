import AgentSystem
import NIOCore
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
    /// trust file on a hung mount) holds back the others' first makes; each dial waits for
    /// it only until its own deadline (``context(for:deadline:)``).
    static let defaultPool = BlockingPool(name: "tls-context", threads: 1, maxQueued: 64)
    private let pool: BlockingPool

    private struct Entry {
        let configuration: TLSConfiguration
        /// The make, shared by every dial that asked while it ran, and its result after.
        let making: TLSContextMaking
    }

    /// Least recently used first; at most ``maxEntries``.
    private let entries = Mutex<[Entry]>([])

    public convenience init() { self.init(pool: Self.defaultPool) }

    /// A cache whose contexts are made on `pool` (tests hold its thread to hold a make).
    init(pool: BlockingPool) { self.pool = pool }

    /// The context for `configuration`: the kept one, else one made now. The wait ends at
    /// `deadline` (``TLSError/timedOut(_:)``) or when the task is cancelled, whether or not
    /// the make has ended; the make goes on for the dials after.
    public func context(for configuration: TLSConfiguration, deadline: NIODeadline) async throws -> TLSContext {
        let making = entries.withLock { entries -> TLSContextMaking in
            if let index = entries.firstIndex(where: { $0.configuration == configuration }) {
                let entry = entries.remove(at: index)
                entries.append(entry)
                return entry.making
            }
            let making = TLSContextMaking()
            if entries.count >= Self.maxEntries { entries.removeFirst() }
            entries.append(Entry(configuration: configuration, making: making))
            Task { [self] in
                let made: Result<TLSContext, any Error>
                do {
                    made = .success(try await pool.run { _ in try TLSContext(configuration: configuration) })
                } catch {
                    made = .failure(error)
                }
                // Not kept when it failed: unless a later make has taken its place already.
                if case .failure = made { self.entries.withLock { entries in entries.removeAll { $0.making === making } } }
                making.finish(made)
            }
            return making
        }
        return try await making.wait(until: deadline)
    }

    /// The configurations kept now (tests).
    var count: Int { entries.withLock { $0.count } }
    /// Dials waiting for a make now (tests).
    var waiting: Int { entries.withLock { $0.reduce(0) { $0 + $1.making.waiting } } }
}

/// One configuration's make and the dials waiting for it. Each waiter leaves at its own
/// deadline or cancellation; the make's end resumes the rest. Bounded: one entry per dial
/// waiting now, removed when it is resumed.
final class TLSContextMaking: Sendable {
    private struct State {
        var result: Result<TLSContext, any Error>?
        var nextWaiter: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<TLSContext, any Error>] = [:]
    }

    private let state = Mutex(State())
    private static let notReady = TLSError.timedOut("the context was not made within the dial's deadline (its trust roots are still being read)")

    /// The make's result, for every waiter now and later.
    func finish(_ result: Result<TLSContext, any Error>) {
        let waiting = state.withLock { s -> [CheckedContinuation<TLSContext, any Error>] in
            s.result = result
            defer { s.waiters = [:] }
            return Array(s.waiters.values)
        }
        for continuation in waiting { continuation.resume(with: result) }
    }

    /// The result once the make ends, or ``TLSError/timedOut(_:)`` at `deadline`, or
    /// `CancellationError` when the task is cancelled.
    func wait(until deadline: NIODeadline) async throws -> TLSContext {
        let (made, id) = state.withLock { s -> (Result<TLSContext, any Error>?, UInt64) in
            if let result = s.result { return (result, 0) }
            defer { s.nextWaiter &+= 1 }
            return (nil, s.nextWaiter)
        }
        if let made { return try made.get() }
        var timer: Task<Void, Never>?
        defer { timer?.cancel() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<TLSContext, any Error>) in
                let ready = state.withLock { s -> Result<TLSContext, any Error>? in
                    if let result = s.result { return result }
                    s.waiters[id] = continuation
                    return nil
                }
                if let ready { return continuation.resume(with: ready) }
                // Cancelled before it waited: the handler found no waiter to resume.
                if Task.isCancelled { return leave(id, CancellationError()) }
                let nanoseconds = UInt64(max(0, (deadline - .now()).nanoseconds))
                timer = Task { [self] in
                    try? await Task.sleep(nanoseconds: nanoseconds)
                    if !Task.isCancelled { leave(id, Self.notReady) }
                }
            }
        } onCancel: {
            leave(id, CancellationError())
        }
    }

    /// Waiter `id` leaves with `error`, if it still waits.
    private func leave(_ id: UInt64, _ error: any Error) {
        state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(throwing: error)
    }

    /// Dials waiting now (tests).
    var waiting: Int { state.withLock { $0.waiters.count } }
}
