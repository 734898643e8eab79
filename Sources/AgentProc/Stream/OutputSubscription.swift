import Synchronization

/// One live reader of a process's output (a WebSocket stream).
///
/// The child never waits for a subscriber: the reactor appends to a queue bounded at
/// ``maxPendingBytes``. When a slow subscriber lets the queue overflow, everything queued
/// is discarded and counted; the subscriber then gets an ``Event/omitted(_:)`` event and
/// carries on with newer output. Memory per subscriber is therefore at most
/// `maxPendingBytes` plus one read chunk (256 KiB).
public final class OutputSubscription: Sendable {
    /// Queue bound per subscriber: 1 MiB.
    public static let maxPendingBytes = 1 << 20
    /// Largest batch ``next()`` hands out at once.
    public static let maxBatchBytes = 64 * 1024

    public enum Event: Sendable, Equatable {
        /// Output bytes, in order.
        case output([UInt8])
        /// This many bytes were not delivered here (never retained, or dropped while slow).
        case omitted(Int)
        /// The process exited; always the last event.
        case exit(ExitStatus)
    }

    private struct State {
        var chunks: [[UInt8]] = []
        var chunkStart = 0
        var pendingBytes = 0
        var omitted = 0
        var exit: ExitStatus?
        var exitDelivered = false
        var cancelled = false
        var waiter: CheckedContinuation<Event?, Never>?
    }

    private let state = Mutex(State())

    init() {}

    /// Called by the producer; never blocks.
    func push(_ bytes: [UInt8]) {
        let resume = state.withLock { s -> (CheckedContinuation<Event?, Never>, Event)? in
            guard !s.cancelled, s.exit == nil else { return nil }
            if s.pendingBytes + bytes.count > Self.maxPendingBytes {
                s.omitted += s.pendingBytes
                s.chunks.removeAll(keepingCapacity: true)
                s.chunkStart = 0
                s.pendingBytes = 0
                if bytes.count > Self.maxPendingBytes {
                    s.omitted += bytes.count
                    return Self.takeEvent(&s)
                }
            }
            s.chunks.append(bytes)
            s.pendingBytes += bytes.count
            return Self.takeEvent(&s)
        }
        if let (waiter, event) = resume { waiter.resume(returning: event) }
    }

    /// Counts bytes the subscriber will never see (the head/tail gap at subscription).
    func addOmitted(_ count: Int) {
        guard count > 0 else { return }
        state.withLock { $0.omitted += count }
    }

    /// Called once when the process exits.
    func finish(_ exit: ExitStatus) {
        let resume = state.withLock { s -> (CheckedContinuation<Event?, Never>, Event)? in
            guard s.exit == nil else { return nil }
            s.exit = exit
            return Self.takeEvent(&s)
        }
        if let (waiter, event) = resume { waiter.resume(returning: event) }
    }

    /// Stops delivery; a pending ``next()`` returns nil.
    public func cancel() {
        let waiter = state.withLock { s -> CheckedContinuation<Event?, Never>? in
            s.cancelled = true
            s.chunks.removeAll()
            s.pendingBytes = 0
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// The next event, or nil once the exit was delivered or the subscription cancelled.
    /// Cancelling the calling task cancels the subscription.
    public func next() async -> Event? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Event?, Never>) in
                let ready = state.withLock { s -> (Event?, Bool) in
                    if s.cancelled { return (nil, true) }
                    if let event = Self.nextEvent(&s) { return (event, true) }
                    if s.exitDelivered { return (nil, true) }
                    s.waiter = continuation
                    return (nil, false)
                }
                if ready.1 { continuation.resume(returning: ready.0) }
            }
        } onCancel: {
            cancel()
        }
    }

    /// Hands the next event to a parked waiter, if there is one.
    private static func takeEvent(_ s: inout State) -> (CheckedContinuation<Event?, Never>, Event)? {
        guard let waiter = s.waiter, let event = nextEvent(&s) else { return nil }
        s.waiter = nil
        return (waiter, event)
    }

    /// Removes and returns the next event: omitted count first, then output, then exit.
    private static func nextEvent(_ s: inout State) -> Event? {
        if s.omitted > 0 {
            defer { s.omitted = 0 }
            return .omitted(s.omitted)
        }
        if s.pendingBytes > 0 {
            var batch: [UInt8] = []
            batch.reserveCapacity(min(s.pendingBytes, maxBatchBytes))
            while s.chunkStart < s.chunks.count,
                  batch.isEmpty || batch.count + s.chunks[s.chunkStart].count <= maxBatchBytes {
                batch.append(contentsOf: s.chunks[s.chunkStart])
                s.chunkStart += 1
            }
            s.pendingBytes -= batch.count
            if s.chunkStart == s.chunks.count {
                s.chunks.removeAll(keepingCapacity: true)
                s.chunkStart = 0
            } else if s.chunkStart > 64 {
                s.chunks.removeFirst(s.chunkStart)
                s.chunkStart = 0
            }
            return .output(batch)
        }
        if let exit = s.exit, !s.exitDelivered {
            s.exitDelivered = true
            return .exit(exit)
        }
        return nil
    }
}
