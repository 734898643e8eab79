import NIOCore

/// Wakes a connection's channels when its own transport can take data again.
///
/// swift-nio-ssh's child channels report writable by the client's window alone (its
/// handler passes no writability down), so a client that grants a 4 GiB window and never
/// reads made the relays queue what processes wrote without bound. The relays also stop
/// reading while the connection's channel is not writable (``isWritable(_:)``), and this
/// handler, after `NIOSSHHandler` in the connection's pipeline, tells every registered
/// channel (at most the connection's 64) when it is writable again.
final class ConnectionWritability: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Never

    private var channels: [ObjectIdentifier: any Channel] = [:]

    /// Whether `channel` (an SSH child) and the connection under it can both take data, and
    /// no key exchange is under way (``RekeyHold`` wakes the channel when it ends).
    static func isWritable(_ channel: any Channel) -> Bool {
        channel.isWritable && (channel.parent?.isWritable ?? true) && !RekeyHold.isHolding(channel)
    }

    /// Registers `child` with its connection's handler, if there is one; call on the loop.
    static func register(_ child: any Channel) {
        guard let parent = child.parent, let handler = try? parent.pipeline.syncOperations.handler(type: ConnectionWritability.self)
        else { return }
        let key = ObjectIdentifier(child)
        handler.channels[key] = child
        let bound = NIOLoopBound(handler, eventLoop: child.eventLoop)
        child.closeFuture.whenComplete { _ in bound.value.channels[key] = nil }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            for channel in channels.values { channel.pipeline.fireChannelWritabilityChanged() }
        }
        context.fireChannelWritabilityChanged()
    }
}
