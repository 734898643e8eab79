import AgentCore
import CoreMetrics
import DRPC
import Logging
import NIOCore
import Synchronization

/// The first handler of each agent-socket connection: notes activity for the registry on
/// every read and takes the connection out of it when it closes.
final class ConnectionActivity: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let id: UInt64
    private let registry: LocalConnectionRegistry

    init(id: UInt64, registry: LocalConnectionRegistry) {
        self.id = id
        self.registry = registry
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        registry.touch(id)
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        registry.remove(id)
        context.fireChannelInactive()
    }
}

/// What the dRPC server's decoder says about one connection, applied: a call in progress
/// (from its Invoke until its answer) marks the connection busy, so the registry never closes
/// it to make room; a frame begun and not finished within ``partialFrameTimeout`` of the
/// decoder holding its first byte closes the connection (AgentCore's ``PartialFrameDeadline``,
/// as on the boundary socket).
final class ConnectionWatch: DRPCServingObserver {
    private struct State {
        var frame = PartialFrameDeadline()
        var timer: Scheduled<Void>?
    }

    private let id: UInt64
    private let registry: LocalConnectionRegistry
    private let channel: any Channel
    private let partialFrameTimeout: TimeAmount
    private let logger: Logger
    private let state = Mutex(State())

    /// The server's budget for the partial-frame line (shared by its connections).
    private let partialFrameLog: LogBudget

    init(
        id: UInt64, registry: LocalConnectionRegistry, channel: any Channel, partialFrameTimeout: TimeAmount, logger: Logger,
        partialFrameLog: LogBudget = LogBudget()
    ) {
        self.partialFrameLog = partialFrameLog
        self.id = id
        self.registry = registry
        self.channel = channel
        self.partialFrameTimeout = partialFrameTimeout
        self.logger = logger
    }

    func decoded(midFrame: Bool, endedAFrame: Bool) {
        state.withLock { s in
            switch s.frame.afterRead(midFrame: midFrame, endedAFrame: endedAFrame) {
            case .arm:
                s.timer?.cancel()
                let channel = channel
                let logger = logger
                let timeout = partialFrameTimeout
                let budget = partialFrameLog
                s.timer = channel.eventLoop.scheduleTask(in: timeout) {
                    SocketMetrics.disconnected("partial_frame").increment()
                    budget.log { leftOut in
                        logger.warning(
                            "agent socket: a client sent part of a frame and did not finish it; disconnected",
                            metadata: ["after": "\(timeout)", "left_out": "\(leftOut)"])
                    }
                    channel.close(promise: nil)
                }
            case .cancel:
                s.timer?.cancel()
                s.timer = nil
            case .none:
                break
            }
        }
    }

    func call(inProgress: Bool) {
        registry.touch(id, busy: inProgress)
    }

    /// Serving ended: the deadline no longer applies.
    func stop() {
        state.withLock { s in
            s.timer?.cancel()
            s.timer = nil
        }
    }
}
