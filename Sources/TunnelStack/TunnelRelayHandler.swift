import NIOCore

/// The local channel's end of a ``TunnelRelay``: forwards its events (reads, EOF, close,
/// errors) to the relay, on the channel's loop.
///
/// A forward's channel gets its handler when it connects, before the tunnel handshake is
/// done and the relay exists: a service may answer and close at once, and NIO then reads
/// everything up to EOF whether or not reads were asked for. Until ``attach(_:)`` the
/// handler holds those reads and events, in order, and hands them to the relay then. What
/// it holds is bounded by what the service had sent before it shut down its side (the
/// local socket's kernel buffers: nothing more can come after EOF, and without EOF NIO
/// reads only when the relay asks).
final class TunnelRelayHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private var relay: TunnelRelay?
    private var channel: (any Channel)?
    /// Reads before the relay attached, oldest first.
    private var heldReads: [ByteBuffer] = []
    private var heldInputClosed = false
    private var heldInactive = false
    private var heldFailed = false

    /// A handler that holds the channel's events until ``attach(_:)`` (a forward).
    init() {}

    /// Hands the held reads and events to `relay` and from now on everything (on the
    /// channel's loop).
    func attach(_ relay: TunnelRelay) {
        relay.eventLoop.preconditionInEventLoop()
        guard self.relay == nil else { return }
        self.relay = relay
        if heldFailed {
            relay.localFailed()
            return
        }
        guard let channel else {
            // Never added to a pipeline (the channel closed first).
            relay.localInactive()
            return
        }
        if channel.isActive, !heldInactive { relay.start(channel: channel) }
        let reads = heldReads
        heldReads = []
        for read in reads { relay.localRead(read) }
        if heldInputClosed { relay.localInputClosed() }
        if heldInactive || !channel.isActive { relay.localInactive() }
    }

    func handlerAdded(context: ChannelHandlerContext) {
        channel = context.channel
        if context.channel.isActive { relay?.start(channel: context.channel) }
    }

    func channelActive(context: ChannelHandlerContext) {
        relay?.start(channel: context.channel)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        if let relay { relay.localRead(buffer) } else { heldReads.append(buffer) }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            if let relay { relay.localInputClosed() } else { heldInputClosed = true }
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let relay { relay.localInactive() } else { heldInactive = true }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let relay { relay.localFailed() } else { heldFailed = true }
        context.close(promise: nil)
    }
}
