import NIOCore
import NIOPosix

/// One UDP flow through the tunnel (peer address:port → agent address:port) relayed to
/// 127.0.0.1:<agent port> through a datagram socket of its own, bound to 127.0.0.1:<peer's
/// port> (a port the kernel picks if that one is taken) and connected to the service, so
/// that only the service's datagrams come back and an ICMP port-unreachable surfaces as an
/// error. It ends after its idle timeout (restarted by every datagram either way), on any
/// read or write error, or when the stack stops.
///
/// `@unchecked Sendable`: every mutable property is read and written only on the stack's
/// loop (the forwarder's ``TunnelUDPForwarder/eventLoop``, where the channel runs too;
/// each entry point asserts it); the rest is immutable.
final class TunnelUDPFlow: @unchecked Sendable {
    let flow: TunnelFlow
    private let forwarder: TunnelUDPForwarder
    let idleTimeout: TimeAmount

    /// Set once bound and connected; datagrams wait in `queued` until then.
    private var channel: (any Channel)?
    /// Bound: ``TunnelStackConfiguration/maxUDPQueuedDatagrams``.
    private var queued: [ByteBuffer] = []
    private var lastActivity: NIODeadline
    private var timer: Scheduled<Void>?
    private(set) var ended = false

    init(flow: TunnelFlow, forwarder: TunnelUDPForwarder) {
        self.flow = flow
        self.forwarder = forwarder
        idleTimeout = Self.idleTimeout(port: flow.localPort, configuration: forwarder.configuration)
        lastActivity = forwarder.configuration.clock()
    }

    /// Coder's rule: 30 s for DNS (port 53), 2 min for the rest (as configured).
    static func idleTimeout(port: UInt16, configuration: TunnelStackConfiguration) -> TimeAmount {
        port == 53 ? configuration.udpDNSIdleTimeout : configuration.udpIdleTimeout
    }

    private var eventLoop: any EventLoop { forwarder.eventLoop }

    /// Binds and connects the local socket; arms the idle timer.
    func start() {
        eventLoop.assertInEventLoop()
        scheduleTimer(in: idleTimeout)
        bind(port: Int(flow.remotePort)).flatMapError { [self] _ in
            // Taken (or otherwise refused): any port.
            bind(port: 0)
        }.flatMap { [self] channel in
            do {
                return channel.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: Int(flow.localPort))).map { channel }
                    .flatMapErrorThrowing { error in
                        channel.close(promise: nil)
                        throw error
                    }
            } catch {
                channel.close(promise: nil)
                return eventLoop.makeFailedFuture(error)
            }
        }.whenComplete { [self] result in
            switch result {
            case .success(let channel): connected(channel)
            case .failure: end()
            }
        }
    }

    private func bind(port: Int) -> EventLoopFuture<any Channel> {
        let capacity = forwarder.maxPayload + 1
        let limit = max(forwarder.configuration.udpWriteBufferLimit, 2)
        return DatagramBootstrap(group: eventLoop)
            // One byte more than fits the MTU: a read that fills it was too large (or cut).
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: capacity))
            .channelOption(.writeBufferWaterMark, value: ChannelOptions.Types.WriteBufferWaterMark(low: limit / 2, high: limit))
            .channelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(TunnelUDPFlowHandler(flow: self))
                }
            }
            .bind(host: "127.0.0.1", port: port)
    }

    private func connected(_ channel: any Channel) {
        eventLoop.assertInEventLoop()
        guard !ended else {
            channel.close(promise: nil)
            return
        }
        self.channel = channel
        let waiting = queued
        queued = []
        for datagram in waiting { write(datagram, to: channel) }
    }

    /// A datagram from the peer, toward the service.
    func fromPeer(_ payload: UnsafeRawBufferPointer) {
        eventLoop.assertInEventLoop()
        guard !ended else {
            forwarder.drop()
            return
        }
        lastActivity = forwarder.configuration.clock()
        let buffer = ByteBuffer(bytes: payload)
        if let channel {
            if write(buffer, to: channel) { forwarder.counters.udpDatagramsIn.increment() }
        } else if queued.count < forwarder.configuration.maxUDPQueuedDatagrams {
            forwarder.counters.udpDatagramsIn.increment()
            queued.append(buffer)
        } else {
            forwarder.drop()
        }
    }

    /// Writes unless NIO already holds the write buffer limit (then drops: false).
    @discardableResult
    private func write(_ buffer: ByteBuffer, to channel: any Channel) -> Bool {
        guard channel.isWritable else {
            forwarder.drop()
            return false
        }
        channel.writeAndFlush(buffer).whenFailure { [self] _ in end() }
        return true
    }

    /// A datagram from the service, toward the peer (ignored unless `channel` is the
    /// flow's connected one: a socket bound but not yet connected takes anyone's).
    func fromLocal(_ buffer: ByteBuffer, channel: any Channel) {
        eventLoop.assertInEventLoop()
        guard !ended, channel === self.channel else { return }
        lastActivity = forwarder.configuration.clock()
        buffer.withUnsafeReadableBytes { forwarder.send($0, on: flow) }
    }

    /// Ends the flow when it has been idle for its timeout; else re-arms the timer for the rest.
    func checkIdle() {
        eventLoop.assertInEventLoop()
        guard !ended else { return }
        let idle = forwarder.configuration.clock() - lastActivity
        if idle >= idleTimeout {
            forwarder.counters.udpIdleTimeouts.increment()
            end()
        } else {
            scheduleTimer(in: idleTimeout - idle)
        }
    }

    private func scheduleTimer(in delay: TimeAmount) {
        timer?.cancel()
        timer = eventLoop.scheduleTask(in: delay) { [self] in checkIdle() }
    }

    /// The connected socket failed or closed: the flow ends. (A socket whose bind or
    /// connect failed reports through the futures in ``start()``.)
    func failed(_ channel: any Channel) {
        eventLoop.assertInEventLoop()
        if channel === self.channel { end() }
    }

    /// Ends the flow: closes the socket, frees the slot. Idempotent.
    func end() {
        stop()?.close(promise: nil)
    }

    /// Ends the flow but leaves its channel (if bound) to the caller to close.
    func stop() -> (any Channel)? {
        eventLoop.assertInEventLoop()
        guard !ended else { return nil }
        ended = true
        timer?.cancel()
        timer = nil
        queued = []
        let channel = self.channel
        self.channel = nil
        forwarder.ended(self)
        return channel
    }
}

/// The local socket's events for its ``TunnelUDPFlow`` (on the stack's loop).
final class TunnelUDPFlowHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>

    private let flow: TunnelUDPFlow

    init(flow: TunnelUDPFlow) {
        self.flow = flow
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        flow.fromLocal(unwrapInboundIn(data).data, channel: context.channel)
    }

    /// Any error (ECONNREFUSED after a port-unreachable, a failed read) ends the flow.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        flow.failed(context.channel)
    }

    func channelInactive(context: ChannelHandlerContext) {
        flow.failed(context.channel)
    }
}
