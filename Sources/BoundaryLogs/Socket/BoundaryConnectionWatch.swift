import AgentCore
import NIOCore

/// The first handler of each boundary connection: notes activity for the registry and
/// closes a connection that began a frame and has not finished it within
/// ``partialFrameTimeout`` of the frame's first byte (a trickled frame cannot hold a slot).
final class BoundaryConnectionWatch: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let id: UInt64
    private let registry: LocalConnectionRegistry
    private let partialFrameTimeout: TimeAmount
    private let onPartialFrame: @Sendable () -> Void
    private var tracker = BoundaryFrameTracker()
    private var frameDeadline = PartialFrameDeadline()
    private var deadline: Scheduled<Void>?

    init(id: UInt64, registry: LocalConnectionRegistry, partialFrameTimeout: TimeAmount, onPartialFrame: @escaping @Sendable () -> Void) {
        self.id = id
        self.registry = registry
        self.partialFrameTimeout = partialFrameTimeout
        self.onPartialFrame = onPartialFrame
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        tracker.feed(buffer.readableBytesView)
        switch frameDeadline.afterRead(midFrame: tracker.isMidFrame) {
        case .arm:
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
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        registry.remove(id)
        context.fireChannelInactive()
    }
}
