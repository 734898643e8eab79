import AgentCore
import CoreMetrics
import Logging
import NIOCore

/// The first handler of each agent-socket connection: notes activity for the registry,
/// tells it whether a call is in progress (from an Invoke read until a CloseSend or Error
/// written), and closes a connection that began a frame and has not finished it within
/// ``partialFrameTimeout`` of the frame's first byte (AgentCore's ``PartialFrameDeadline``,
/// as on the boundary socket).
final class ConnectionWatch: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let id: UInt64
    private let registry: LocalConnectionRegistry
    private let partialFrameTimeout: TimeAmount
    private let logger: Logger
    private var tracker = FrameTracker()
    private var outboundTracker = FrameTracker()
    private var frameDeadline = PartialFrameDeadline()
    private var deadline: Scheduled<Void>?

    init(id: UInt64, registry: LocalConnectionRegistry, partialFrameTimeout: TimeAmount, logger: Logger) {
        self.id = id
        self.registry = registry
        self.partialFrameTimeout = partialFrameTimeout
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        var invoked = false
        tracker.feed(count: buffer.readableBytes, bytes: buffer.readableBytesView) { kind in
            if kind == 1 { invoked = true }
        }
        registry.touch(id, busy: invoked ? true : nil)
        switch frameDeadline.afterRead(midFrame: tracker.isMidFrame) {
        case .arm:
            let channel = context.channel
            let logger = logger
            let timeout = partialFrameTimeout
            deadline = context.eventLoop.scheduleTask(in: timeout) {
                SocketMetrics.disconnected("partial_frame").increment()
                logger.warning("agent socket: a client sent part of a frame and did not finish it; disconnected", metadata: ["after": "\(timeout)"])
                channel.close(promise: nil)
            }
        case .cancel:
            deadline?.cancel()
            deadline = nil
        case .none:
            break
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let buffer = unwrapOutboundIn(data)
        var ended = false
        outboundTracker.feed(count: buffer.readableBytes, bytes: buffer.readableBytesView) { kind in
            // Error (3) or CloseSend (6) from the server ends its call.
            if kind == 3 || kind == 6 { ended = true }
        }
        registry.touch(id, busy: ended ? false : nil)
        context.write(data, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        registry.remove(id)
        context.fireChannelInactive()
    }
}
