import NIOCore

/// How a DERP connection ended: the error text (nil for a plain close by us) and the
/// server's Restarting advice, if it sent one.
struct DERPConnectionEnd: Sendable {
    var error: String?
    var restarting: (reconnectIn: UInt32, tryFor: UInt32)?
}

/// One established DERP connection: its channel, and a send path bounded by the client's
/// queue (``DERPClient/Configuration/maxQueuedPackets`` and `maxQueuedBytes`) that flushes
/// once per loop turn (``CoalescingWriter``).
final class DERPConnection: Sendable {
    let channel: any Channel
    let node: DERPNode
    let transport: DERPTransport
    let serverKey: X25519PublicKey
    /// Completes (never fails) when the connection is gone.
    let ended: EventLoopFuture<DERPConnectionEnd>
    private let counters: DERPCounters
    private let maxQueuedPackets: Int
    private let maxQueuedBytes: Int
    private let writer: CoalescingWriter

    init(
        channel: any Channel, node: DERPNode, transport: DERPTransport, serverKey: X25519PublicKey,
        ended: EventLoopFuture<DERPConnectionEnd>, counters: DERPCounters, maxQueuedPackets: Int, maxQueuedBytes: Int
    ) {
        self.channel = channel
        self.node = node
        self.transport = transport
        self.serverKey = serverKey
        self.ended = ended
        self.counters = counters
        self.maxQueuedPackets = maxQueuedPackets
        self.maxQueuedBytes = maxQueuedBytes
        self.writer = CoalescingWriter(channel: channel)
    }

    /// Queues a SendPacket frame; false (counted) when the queue is full. Never blocks.
    func sendPacket(to peer: X25519PublicKey, packet: some Collection<UInt8>) -> Bool {
        let length = X25519PublicKey.length + packet.count
        let size = DERPProtocol.headerLength + length
        guard counters.reserve(bytes: size, maxPackets: maxQueuedPackets, maxBytes: maxQueuedBytes) else { return false }
        var buffer = channel.allocator.buffer(capacity: size)
        buffer.writeInteger(DERPFrameType.sendPacket)
        buffer.writeInteger(UInt32(length))
        buffer.writeBytes(peer.bytes)
        buffer.writeBytes(packet)
        let counters = self.counters
        let written = channel.eventLoop.makePromise(of: Void.self)
        written.futureResult.whenComplete { result in
            if case .success = result {
                counters.release(bytes: size, written: true)
            } else {
                counters.release(bytes: size, written: false)
            }
        }
        writer.write(buffer, promise: written)
        return true
    }

    func close() {
        channel.close(promise: nil)
    }
}
