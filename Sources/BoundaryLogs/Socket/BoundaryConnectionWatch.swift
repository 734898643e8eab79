import AgentCore
import NIOCore

/// Each boundary connection's handler after the frame decoder: notes activity for the
/// registry (each frame, each frame begun) and closes a connection that began a frame and
/// has not finished it within ``partialFrameTimeout`` of the frame's first byte (a trickled
/// frame cannot hold a slot). The decoder says when a frame begins and ends
/// (``BoundaryFrameDecoder/MidFrameChanged``); this watch does not parse bytes.
final class BoundaryConnectionWatch: ChannelInboundHandler {
    typealias InboundIn = BoundaryFrame
    typealias InboundOut = BoundaryFrame

    private let id: UInt64
    private let registry: LocalConnectionRegistry
    private let partialFrameTimeout: TimeAmount
    private let onPartialFrame: @Sendable () -> Void
    private var frameDeadline = PartialFrameDeadline()
    private var deadline: Scheduled<Void>?

    init(id: UInt64, registry: LocalConnectionRegistry, partialFrameTimeout: TimeAmount, onPartialFrame: @escaping @Sendable () -> Void) {
        self.id = id
        self.registry = registry
        self.partialFrameTimeout = partialFrameTimeout
        self.onPartialFrame = onPartialFrame
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        registry.touch(id)
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard let change = event as? BoundaryFrameDecoder.MidFrameChanged else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        switch frameDeadline.afterRead(midFrame: change.isMidFrame, endedAFrame: change.endedAFrame) {
        case .arm:
            deadline?.cancel()
            let channel = context.channel
            let onPartialFrame = onPartialFrame
            deadline = context.eventLoop.scheduleTask(in: partialFrameTimeout) {
                onPartialFrame()
                channel.close(promise: nil)
            }
        case .cancel:
            deadline?.cancel()
            deadline = nil
        case .none:
            break
        }
        registry.touch(id, busy: frameDeadline.isMidFrame)
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        registry.remove(id)
        context.fireChannelInactive()
    }
}
