import DERP
import NIOCore
import Synchronization

/// One client connected to the relay double: its key (once its ClientInfo opened) and
/// its channel, with the relay's per-client queue bound (``DERPRelayDouble/maxQueuedPackets``).
final class RelayPeer: Sendable {
    let channel: any Channel
    let key: X25519PublicKey
    private let queued = Mutex(0)

    init(channel: any Channel, key: X25519PublicKey) {
        self.channel = channel
        self.key = key
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
        let future = channel.writeAndFlush(channel.allocator.buffer(bytes: bytes))
        if bounded { future.whenComplete { _ in self.queued.withLock { $0 -= 1 } } }
        return true
    }

    /// Frames written to the socket's queue but not yet to the kernel.
    var queuedCount: Int { queued.withLock { $0 } }
}
