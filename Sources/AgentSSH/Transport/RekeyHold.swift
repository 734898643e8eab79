import NIOCore

/// First in every SSH channel's pipeline: while its connection's key exchange runs
/// (``SSHRekeyGate/isHolding``), keeps the channel's writes, flushes, reads, events and close
/// in order, and passes them on when it has ended; then tells the channel's writers that
/// they may write again (``ConnectionWritability/isWritable(_:)`` is false meanwhile).
///
/// Bounded: a writer stops once that is false, so a channel holds what its writers had
/// read before they looked (a relay's read, at most 64 KiB a message), its requests and its close.
final class RekeyHold: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = Any
    typealias OutboundOut = Any

    private enum Operation {
        case write(NIOAny, EventLoopPromise<Void>?)
        case flush
        case read
        case close(CloseMode, EventLoopPromise<Void>?)
        case event(Any, EventLoopPromise<Void>?)
    }

    let gate: SSHRekeyGate
    /// Empty (and unallocated) but while the connection rekeys.
    private var held: [Operation] = []
    private var context: ChannelHandlerContext?

    init(gate: SSHRekeyGate) { self.gate = gate }

    /// Puts a hold for `gate` first in `child`'s pipeline; call on the loop.
    static func install(_ child: any Channel, gate: SSHRekeyGate) throws {
        try child.pipeline.syncOperations.addHandler(RekeyHold(gate: gate), position: .first)
    }

    /// Whether `channel`'s connection is mid key exchange.
    static func isHolding(_ channel: any Channel) -> Bool {
        (try? channel.pipeline.syncOperations.handler(type: RekeyHold.self))?.gate.isHolding ?? false
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        gate.register(self, for: context.channel)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        gate.unregister(context.channel)
        self.context = nil
        let operations = held
        held = []
        for operation in operations {
            switch operation {
            case .write(_, let promise), .close(_, let promise), .event(_, let promise): promise?.fail(ChannelError.ioOnClosedChannel)
            case .flush, .read: break
            }
        }
    }

    /// The exchange has ended: everything held goes on, in order.
    func release() {
        guard let context else { return }
        let operations = held
        held = []
        for operation in operations {
            switch operation {
            case .write(let data, let promise): context.write(data, promise: promise)
            case .flush: context.flush()
            case .read: context.read()
            case .close(let mode, let promise): context.close(mode: mode, promise: promise)
            case .event(let event, let promise): context.triggerUserOutboundEvent(event, promise: promise)
            }
        }
        wake()
    }

    /// Tells the channel's writers to look at ``ConnectionWritability/isWritable(_:)`` again.
    func wake() {
        guard let context, context.channel.isActive else { return }
        context.fireChannelWritabilityChanged()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if gate.isHolding { held.append(.write(data, promise)) } else { context.write(data, promise: promise) }
    }

    func flush(context: ChannelHandlerContext) {
        if gate.isHolding { held.append(.flush) } else { context.flush() }
    }

    func read(context: ChannelHandlerContext) {
        guard gate.isHolding else { return context.read() }
        if case .read = held.last {} else { held.append(.read) }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if gate.isHolding { held.append(.close(mode, promise)) } else { context.close(mode: mode, promise: promise) }
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        if gate.isHolding { held.append(.event(event, promise)) } else { context.triggerUserOutboundEvent(event, promise: promise) }
    }
}
