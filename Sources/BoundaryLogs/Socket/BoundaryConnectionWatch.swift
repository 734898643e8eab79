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
    private var frameStarted: NIODeadline?
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
        if tracker.isMidFrame {
            // The deadline runs from the frame's first byte: a client that trickles a byte
            // now and then gains nothing.
            if frameStarted == nil {
                frameStarted = .now()
                let channel = context.channel
                let onPartialFrame = onPartialFrame
                deadline = context.eventLoop.scheduleTask(in: partialFrameTimeout) {
                    onPartialFrame()
                    channel.close(promise: nil)
                }
            }
        } else if frameStarted != nil {
            frameStarted = nil
            deadline?.cancel()
            deadline = nil
        }
        registry.touch(id, busy: frameStarted != nil)
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        registry.remove(id)
        context.fireChannelInactive()
    }
}
