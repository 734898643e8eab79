import CoreMetrics
import Logging
import NIOCore

/// The first handler of each agent-socket connection: notes activity for the registry and
/// closes a connection that began a frame and sent nothing more for ``partialFrameTimeout``.
final class ConnectionWatch: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let id: UInt64
    private let registry: SocketConnectionRegistry
    private let partialFrameTimeout: TimeAmount
    private let logger: Logger
    private var tracker = FrameTracker()
    private var deadline: Scheduled<Void>?

    init(id: UInt64, registry: SocketConnectionRegistry, partialFrameTimeout: TimeAmount, logger: Logger) {
        self.id = id
        self.registry = registry
        self.partialFrameTimeout = partialFrameTimeout
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        tracker.feed(count: buffer.readableBytes, bytes: buffer.readableBytesView)
        registry.touch(id)
        deadline?.cancel()
        deadline = nil
        if tracker.isMidFrame {
            let channel = context.channel
            let logger = logger
            let timeout = partialFrameTimeout
            deadline = context.eventLoop.scheduleTask(in: timeout) {
                SocketMetrics.disconnected("partial_frame").increment()
                logger.warning("agent socket: a client sent part of a frame and then nothing; disconnected", metadata: ["after": "\(timeout)"])
                channel.close(promise: nil)
            }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        registry.touch(id)
        context.write(data, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        registry.remove(id)
        context.fireChannelInactive()
    }
}
