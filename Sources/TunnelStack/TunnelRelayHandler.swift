import NIOCore

/// The local channel's end of a ``TunnelRelay``: forwards its events (reads, EOF, close,
/// errors) to the relay, on the channel's loop.
final class TunnelRelayHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let relay: TunnelRelay
    /// Added to a channel that was already connected (a forward): inactive then means closed.
    private let connected: Bool

    init(relay: TunnelRelay, connected: Bool) {
        self.relay = relay
        self.connected = connected
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive {
            relay.start(channel: context.channel)
        } else if connected {
            // Connected channels are active until closed: this one closed before the relay
            // began (a forward whose server hung up at once).
            relay.localInactive()
        }
    }

    func channelActive(context: ChannelHandlerContext) {
        relay.start(channel: context.channel)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        relay.localRead(unwrapInboundIn(data))
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            relay.localInputClosed()
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        relay.localInactive()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        relay.localFailed()
        context.close(promise: nil)
    }
}
