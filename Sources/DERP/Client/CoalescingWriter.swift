import NIOCore
import Synchronization

/// Writes buffers to a channel from any thread and flushes once per event-loop turn, so a
/// burst of packets (one read's worth of WireGuard datagrams, their ACKs) costs one `writev`
/// and, from another thread, one wake-up of the channel's loop, instead of one each. Small
/// buffers of a turn are copied together into writes of up to ``mergedLimit`` bytes: the
/// channel then keeps one pending write for a run of packets instead of one per packet.
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

    /// The most bytes one merged write holds: over WebSocket each write is one message, and
    /// a peer may refuse a message over 32 KiB (coder/websocket's default read limit closes
    /// the connection with 1009), so merged writes stay well under it.
    static let mergedLimit = 16 * 1024
    /// Buffers this large or larger are written as they are.
    static let mergeBelow = 8 * 1024

    private func drain() {
        let items = pending.withLock { p -> [(ByteBuffer, EventLoopPromise<Void>?)] in
            defer { p = Pending() }
            return p.items
        }
        var run = MergedRun()
        for (buffer, promise) in items {
            if buffer.readableBytes >= Self.mergeBelow || run.bytes + buffer.readableBytes > Self.mergedLimit {
                run.write(to: channel)
            }
            if buffer.readableBytes >= Self.mergeBelow {
                channel.write(buffer, promise: promise)
            } else {
                run.add(buffer, promise: promise, allocator: channel.allocator)
            }
        }
        run.write(to: channel)
        channel.flush()
    }

    /// Small buffers in order, and their promises, written as one buffer (a single one as
    /// it is, with no copy).
    private struct MergedRun {
        private var first: ByteBuffer?
        private var merged: ByteBuffer?
        private var promises: [EventLoopPromise<Void>] = []
        private(set) var bytes = 0

        mutating func add(_ buffer: ByteBuffer, promise: EventLoopPromise<Void>?, allocator: ByteBufferAllocator) {
            if let promise { promises.append(promise) }
            bytes += buffer.readableBytes
            if var merged {
                self.merged = nil
                merged.writeImmutableBuffer(buffer)
                self.merged = merged
            } else if let first {
                // Room for a few more like these two; it grows up to the limit as needed.
                var merged = allocator.buffer(capacity: min(CoalescingWriter.mergedLimit, 4 * bytes))
                merged.writeImmutableBuffer(first)
                merged.writeImmutableBuffer(buffer)
                self.merged = merged
                self.first = nil
            } else {
                first = buffer
            }
        }

        /// Writes what was added and starts over.
        mutating func write(to channel: any Channel) {
            defer { self = MergedRun() }
            guard let buffer = merged ?? first else { return }
            switch promises.count {
            case 0:
                channel.write(buffer, promise: nil)
            case 1:
                channel.write(buffer, promise: promises[0])
            default:
                let written = channel.eventLoop.makePromise(of: Void.self)
                let waiting = promises
                written.futureResult.whenComplete { result in
                    for promise in waiting { promise.completeWith(result) }
                }
                channel.write(buffer, promise: written)
            }
        }
    }
}
