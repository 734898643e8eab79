import CLwIPGlue
import Glibc
import NIOCore
import Synchronization

/// One TCP connection of the tunnel (an lwIP pcb) as a NIO `Channel` on lwIP's loop: its own
/// pipeline, reads as `ByteBuffer`s on `read()` (or `autoRead`), writes into lwIP's send
/// buffer, FIN on `close(mode: .output)`, `ChannelEvent.inputClosed` on the peer's FIN when
/// `allowRemoteHalfClosure` is set. The rules (back pressure, writability, ordering) are
/// ``TunnelChannelCore``'s; this class carries its decisions out against lwIP and the
/// pipeline. Options other than `autoRead` and `allowRemoteHalfClosure`, and `bind`,
/// `connect`, `register` and `close(mode: .input)`, fail with
/// `ChannelError.operationUnsupported`.
///
/// `@unchecked Sendable`: every mutable property is touched only on ``eventLoop`` (lwIP's
/// loop: the stack's callbacks run there, and every entry from the pipeline is on it or hops
/// to it); `isWritable` and `isActive`, read from anywhere, are atomics.
public final class TunnelChannel: Channel, ChannelCore, TunnelPCBOwner, @unchecked Sendable {
    public let eventLoop: any EventLoop
    public let allocator = ByteBufferAllocator()
    public let localAddress: SocketAddress?
    public let remoteAddress: SocketAddress?
    public var parent: (any Channel)? { nil }
    public var closeFuture: EventLoopFuture<Void> { closePromise.futureResult }
    public var pipeline: ChannelPipeline { _pipeline }
    public var _channelCore: any ChannelCore { self }
    public var isWritable: Bool { writable.load(ordering: .relaxed) }
    public var isActive: Bool { active.load(ordering: .relaxed) }

    /// The connection's flow (the peer's and the stack's address and port).
    let flow: TunnelFlow

    private var _pipeline: ChannelPipeline!
    private let closePromise: EventLoopPromise<Void>
    private let writable = Atomic<Bool>(true)
    private let active = Atomic<Bool>(false)
    private var core = TunnelChannelCore()
    private let stack: StackCore
    private var pcb: OpaquePointer?
    private var link: Unmanaged<PCBLink>?
    private var deliveryDue = false
    private var drainDue = false
    /// lwIP's error when it freed the pcb (ERR_ABRT: its keepalive or retransmissions gave up).
    private var failure: Int32 = 0

    init(pcb: OpaquePointer, flow: TunnelFlow, stack: StackCore) {
        self.eventLoop = stack.eventLoop
        self.flow = flow
        self.stack = stack
        self.pcb = pcb
        localAddress = try? SocketAddress(ipAddress: flow.local.description, port: Int(flow.localPort))
        remoteAddress = try? SocketAddress(ipAddress: flow.remote.description, port: Int(flow.remotePort))
        closePromise = stack.eventLoop.makePromise()
        _pipeline = ChannelPipeline(channel: self)
        link = PCBLink.attach(pcb, to: self)
    }

    // MARK: activation (by the stack)

    /// The acceptor's initializer finished: the channel goes active and reads start.
    func activate() {
        eventLoop.assertInEventLoop()
        guard core.state == .accepted else { return }
        core.activate()
        active.store(true, ordering: .relaxed)
        pipeline.syncOperations.fireChannelRegistered()
        pipeline.syncOperations.fireChannelActive()
        deliver()
        drainWrites()
    }

    /// Ends the connection at once (RST): the stack's shutdown, a refused set-up.
    func abort() {
        eventLoop.assertInEventLoop()
        finish(error: nil, reset: true)
    }

    // MARK: lwIP's events (on the loop, inside lwIP: work that calls back into lwIP or the
    // pipeline is deferred until lwIP returns)

    func pcbReceive(_ data: OpaquePointer, length: Int) -> Bool {
        var buffer = allocator.buffer(capacity: length)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { target in
            tl_data_copy(data, target.baseAddress, length, 0)
            return length
        }
        guard core.received(&buffer) else { return false }
        stack.counters.bytesFromTunnel.increment(by: UInt64(length))
        scheduleDelivery()
        return true
    }

    func pcbFinished() {
        core.receivedFIN()
        scheduleDelivery()
    }

    func pcbSent() {
        guard core.bytesWaiting > 0, !drainDue else { return }
        drainDue = true
        stack.deferUntilLwIPReturns(self)
    }

    func pcbFailed(error: Int32) {
        // lwIP has freed the pcb already.
        pcb = nil
        failure = error
        link?.release()
        link = nil
        stack.deferUntilLwIPReturns(self, failed: true)
    }

    private func scheduleDelivery() {
        guard !deliveryDue else { return }
        deliveryDue = true
        stack.deferUntilLwIPReturns(self)
    }

    /// lwIP's ERR_ABRT.
    private static let lwIPAborted: Int32 = -13

    /// lwIP returned: carry out what its callbacks left.
    func runDeferred(failed: Bool) {
        if failed {
            let error =
                failure == Self.lwIPAborted
                ? IOError(errnoCode: ETIMEDOUT, reason: "the tunnel peer stopped answering (keepalive or retransmissions)")
                : IOError(errnoCode: ECONNRESET, reason: "the tunnel peer reset the connection")
            finish(error: error, reset: false)
            return
        }
        if deliveryDue {
            deliveryDue = false
            deliver()
        }
        if drainDue {
            drainDue = false
            drainWrites()
        }
    }

    // MARK: carrying out the core's decisions

    /// Fires what the core has for the pipeline, acknowledging each read to lwIP.
    private func deliver() {
        while let event = core.nextInbound() {
            switch event {
            case .read(let bytes):
                if let pcb { LwIPCore.confined { tl_pcb_received(pcb, bytes.readableBytes) } }
                pipeline.syncOperations.fireChannelRead(NIOAny(bytes))
            case .readComplete:
                pipeline.syncOperations.fireChannelReadComplete()
            case .inputClosed:
                pipeline.syncOperations.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            case .close:
                finish(error: nil, reset: false)
            }
        }
    }

    /// Hands flushed writes to lwIP, then FIN if the output is closing.
    private func drainWrites() {
        guard let pcb else { return }
        let drained = LwIPCore.confined {
            core.drain { buffer in
                let taken = buffer.withUnsafeReadableBytes { tl_pcb_write(pcb, $0.baseAddress, $0.count) }
                stack.counters.bytesToTunnel.increment(by: UInt64(taken))
                return taken
            }
        }
        if drained.shutdownOutput { LwIPCore.confined { tl_pcb_shutdown_output(pcb) } }
        for promise in drained.completed { promise.succeed() }
        if drained.writabilityChanged != nil { writabilityChanged() }
        drained.outputClosePromise?.succeed()
    }

    /// Publishes the core's writability as it is now, and fires the event if that changed:
    /// a write promise completed just before (in ``drainWrites()``) may have written past the
    /// high-water mark since the drain found the channel writable again.
    private func writabilityChanged() {
        let now = core.isWritable
        guard writable.exchange(now, ordering: .relaxed) != now else { return }
        pipeline.syncOperations.fireChannelWritabilityChanged()
    }

    /// Closes once: FIN (or RST for `reset`) to the peer unless lwIP already freed the pcb,
    /// fails what waits, fires the error (if any), `channelInactive` and
    /// `channelUnregistered`.
    private func finish(error: (any Error)?, reset: Bool, promise: EventLoopPromise<Void>? = nil) {
        guard let closing = core.close() else {
            promise?.fail(ChannelError.alreadyClosed)
            return
        }
        if let pcb {
            self.pcb = nil
            LwIPCore.confined {
                // Bytes lwIP gave us that the pipeline never took: acknowledged, so that
                // lwIP closes with FIN (it resets a connection closed with data unread).
                if !reset, closing.unacknowledged > 0 { tl_pcb_received(pcb, closing.unacknowledged) }
                tl_pcb_detach(pcb)
                if reset { tl_pcb_abort(pcb) } else { tl_pcb_close(pcb) }
            }
            link?.release()
            link = nil
        }
        stack.channelClosed(self)
        active.store(false, ordering: .relaxed)
        for write in closing.failedWrites { write.fail(ChannelError.ioOnClosedChannel) }
        if let error { pipeline.syncOperations.fireErrorCaught(error) }
        promise?.succeed()
        if closing.wasActive {
            pipeline.syncOperations.fireChannelInactive()
            pipeline.syncOperations.fireChannelUnregistered()
        }
        eventLoop.execute { [self] in
            removeHandlers(pipeline: _pipeline)
            closePromise.succeed()
        }
    }

    // MARK: Channel

    public func setOption<Option: ChannelOption>(_ option: Option, value: Option.Value) -> EventLoopFuture<Void> {
        if eventLoop.inEventLoop {
            return eventLoop.makeCompletedFuture { try setOption0(option, value: value) }
        }
        return eventLoop.submit { try self.setOption0(option, value: value) }
    }

    public func getOption<Option: ChannelOption>(_ option: Option) -> EventLoopFuture<Option.Value> {
        if eventLoop.inEventLoop {
            return eventLoop.makeCompletedFuture { try getOption0(option) }
        }
        return eventLoop.submit { try self.getOption0(option) }
    }

    public var syncOptions: (any NIOSynchronousChannelOptions)? { SynchronousOptions(channel: self) }

    private struct SynchronousOptions: NIOSynchronousChannelOptions {
        let channel: TunnelChannel

        func setOption<Option: ChannelOption>(_ option: Option, value: Option.Value) throws {
            channel.eventLoop.preconditionInEventLoop()
            try channel.setOption0(option, value: value)
        }

        func getOption<Option: ChannelOption>(_ option: Option) throws -> Option.Value {
            channel.eventLoop.preconditionInEventLoop()
            return try channel.getOption0(option)
        }
    }

    fileprivate func setOption0<Option: ChannelOption>(_ option: Option, value: Option.Value) throws {
        eventLoop.assertInEventLoop()
        switch option {
        case _ as ChannelOptions.Types.AutoReadOption:
            let on = value as! Bool
            core.autoRead = on
            if on { read0() }
        case _ as ChannelOptions.Types.AllowRemoteHalfClosureOption:
            core.allowRemoteHalfClosure = value as! Bool
        default:
            throw ChannelError.operationUnsupported
        }
    }

    fileprivate func getOption0<Option: ChannelOption>(_ option: Option) throws -> Option.Value {
        eventLoop.assertInEventLoop()
        switch option {
        case _ as ChannelOptions.Types.AutoReadOption: return core.autoRead as! Option.Value
        case _ as ChannelOptions.Types.AllowRemoteHalfClosureOption: return core.allowRemoteHalfClosure as! Option.Value
        // What waits to be sent: the HTTP core's write-stall deadline moves while it drains.
        case _ as ChannelOptions.Types.BufferedWritableBytesOption: return core.bytesWaiting as! Option.Value
        default: throw ChannelError.operationUnsupported
        }
    }

    // MARK: ChannelCore

    public func localAddress0() throws -> SocketAddress {
        guard let localAddress else { throw ChannelError.operationUnsupported }
        return localAddress
    }

    public func remoteAddress0() throws -> SocketAddress {
        guard let remoteAddress else { throw ChannelError.operationUnsupported }
        return remoteAddress
    }

    public func register0(promise: EventLoopPromise<Void>?) {
        promise?.fail(ChannelError.operationUnsupported)
    }

    public func registerAlreadyConfigured0(promise: EventLoopPromise<Void>?) {
        promise?.fail(ChannelError.operationUnsupported)
    }

    public func bind0(to: SocketAddress, promise: EventLoopPromise<Void>?) {
        promise?.fail(ChannelError.operationUnsupported)
    }

    public func connect0(to: SocketAddress, promise: EventLoopPromise<Void>?) {
        promise?.fail(ChannelError.operationUnsupported)
    }

    public func write0(_ data: NIOAny, promise: EventLoopPromise<Void>?) {
        let buffer = unwrapData(data, as: ByteBuffer.self)
        let (refused, changed) = core.write(buffer, promise: promise)
        if refused {
            promise?.fail(core.state == .closed ? ChannelError.ioOnClosedChannel : ChannelError.outputClosed)
            return
        }
        if changed != nil { writabilityChanged() }
    }

    public func flush0() {
        core.flush()
        drainWrites()
    }

    public func read0() {
        core.read()
        guard core.hasDeliverable, !deliveryDue else { return }
        // Delivered on the next turn, not inside the pipeline's call.
        deliveryDue = true
        eventLoop.execute { [self] in
            deliveryDue = false
            deliver()
        }
    }

    public func close0(error: any Error, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        switch mode {
        case .all:
            finish(error: nil, reset: false, promise: promise)
        case .output:
            guard let dropped = core.closeOutput(promise: promise) else {
                promise?.fail(core.state == .closed ? ChannelError.alreadyClosed : ChannelError.outputClosed)
                return
            }
            for write in dropped { write.fail(ChannelError.outputClosed) }
            drainWrites()
        case .input:
            promise?.fail(ChannelError.operationUnsupported)
        }
    }

    public func triggerUserOutboundEvent0(_ event: Any, promise: EventLoopPromise<Void>?) {
        promise?.fail(ChannelError.operationUnsupported)
    }

    public func channelRead0(_ data: NIOAny) {}

    public func errorCaught0(error: any Error) {}
}
