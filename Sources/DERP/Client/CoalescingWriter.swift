import NIOCore
import Synchronization

/// Writes buffers to a channel from any thread and flushes once per event-loop turn, so a
/// burst of packets (one read's worth of WireGuard datagrams, their ACKs) costs one `writev`
/// and, from another thread, one wake-up of the channel's loop, instead of one each.
///
/// Order is kept: buffers reach the channel in the order `write` was called. Nothing here
/// bounds how many wait: the callers do, before they write (``DERPClient``'s queue bounds,
/// the relay double's per-client cap), and each buffer's promise completes when the channel
/// wrote or dropped it, as with `writeAndFlush`.
public final class CoalescingWriter: Sendable {
    private struct Pending {
        var items: [(ByteBuffer, EventLoopPromise<Void>?)] = []
        var scheduled = false
    }

    private let channel: any Channel
    private let pending = Mutex(Pending())

    public init(channel: any Channel) {
        self.channel = channel
    }

    /// Queues `buffer`; the channel writes it and flushes at the end of the loop's current
    /// turn (or its next, when called from another thread).
    public func write(_ buffer: ByteBuffer, promise: EventLoopPromise<Void>?) {
        let schedule = pending.withLock { p -> Bool in
            p.items.append((buffer, promise))
            defer { p.scheduled = true }
            return !p.scheduled
        }
        // A task runs after the I/O events of the turn it was queued in.
        if schedule { channel.eventLoop.execute { self.drain() } }
    }

    private func drain() {
        let items = pending.withLock { p -> [(ByteBuffer, EventLoopPromise<Void>?)] in
            defer { p = Pending() }
            return p.items
        }
        for (buffer, promise) in items { channel.write(buffer, promise: promise) }
        channel.flush()
    }
}
