import NIOCore

/// Wakes a connection's channels when its own transport can take data again.
///
/// swift-nio-ssh's child channels report writable by the client's window alone (its
/// handler passes no writability down), so a client that grants a 4 GiB window and never
/// reads made the relays queue what processes wrote without bound. The relays also stop
/// reading while the connection's channel is not writable (``isWritable(_:)``), and this
/// handler, after `NIOSSHHandler` in the connection's pipeline, tells every channel (through
/// the ``RekeyHold`` each has in its connection's ``SSHRekeyGate``) when it is writable again.
final class ConnectionWritability: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Never

    private let gate: SSHRekeyGate

    init(gate: SSHRekeyGate) { self.gate = gate }

    /// Whether `channel` (an SSH child) and the connection under it can both take data, and
    /// no key exchange is under way (``RekeyHold`` wakes the channel when it ends).
    static func isWritable(_ channel: any Channel) -> Bool {
        channel.isWritable && (channel.parent?.isWritable ?? true) && !RekeyHold.isHolding(channel)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { gate.wakeChannels() }
        context.fireChannelWritabilityChanged()
    }
}
