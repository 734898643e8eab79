import DERP
import NIOCore
import Synchronization

/// One client connected to the relay double: its key (once its ClientInfo opened) and
/// its channel, with the relay's per-client queue bound (``DERPRelayDouble/maxQueuedPackets``);
/// frames are flushed once per loop turn, as the agent's client does.
final class RelayPeer: Sendable {
    let channel: any Channel
    let key: X25519PublicKey
    private let queued = Mutex(0)
    private let writer: CoalescingWriter

    init(channel: any Channel, key: X25519PublicKey) {
        self.channel = channel
        self.key = key
        self.writer = CoalescingWriter(channel: channel)
    }

    /// Writes a whole frame (or raw bytes) to the client; false when its queue is full.
    @discardableResult
    func write(_ bytes: [UInt8], bounded: Bool = true) -> Bool {
        if bounded {
            let ok = queued.withLock { n -> Bool in
                guard n < DERPRelayDouble.maxQueuedPackets else { return false }
                n += 1
                return true
            }
            guard ok else { return false }
        }
        let promise = bounded ? channel.eventLoop.makePromise(of: Void.self) : nil
        promise?.futureResult.whenComplete { _ in self.queued.withLock { $0 -= 1 } }
        writer.write(channel.allocator.buffer(bytes: bytes), promise: promise)
        return true
    }

    /// Frames written to the socket's queue but not yet to the kernel.
    var queuedCount: Int { queued.withLock { $0 } }
}
